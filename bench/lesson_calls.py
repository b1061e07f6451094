"""What each lesson's recorded calls are: whose replies, how many per task, tokens, cut-off replies, and how many replies
the task's own parser reads (a format-compliance figure for a real model), from the committed caches in nbs/cache.

Time per call is the gap between a call's cache timestamp and the one before in the same lesson (a recording asks one
call at a time; gaps over 10 minutes are taken as pauses between recording passes and left out). When two lessons were
recorded at once against one server, a gap includes waiting for the other lesson's call: read it as an upper bound.

Usage: python bench/lesson_calls.py [nbs/cache/41_checker.sqlite ...]
"""
import json, sqlite3, statistics, sys
from collections import defaultdict
from pathlib import Path
from ragnb.check.checker import parse_claims, parse_labels
from ragnb.synth.diversity import parse_entities, parse_personas
from ragnb.synth.multimodal import parse_multimodal
from ragnb.synth.generate import parse_factoid, parse_rating

PARSERS = {'factoid_qa': parse_factoid, 'factoid_qa_next': parse_factoid, 'critique_groundedness': parse_rating,
           'critique_relevance': parse_rating, 'critique_standalone': parse_rating, 'check_claims': parse_labels,
           'chunk_entities': parse_entities, 'propose_personas': parse_personas, 'critique_single_hop': parse_rating,
           'multimodal_qa': lambda t: parse_multimodal(t, {f'{k}_{i}' for k in ('table', 'image') for i in range(1, 20)}),
           'extract_claims_triplet': parse_claims,
           'extract_claims_sentence': lambda t: parse_claims(t, 'sentence'), 'extract_entities': parse_entities, 'personas': parse_personas}

def rows(db:Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try: return con.execute("SELECT model, prompt, record, created FROM calls WHERE kind = 'chat' ORDER BY created").fetchall()
    finally: con.close()

def readable(prompt:str, text:str) -> bool|None:
    parse = PARSERS.get(prompt)
    if parse is None: return None
    try: parse(text); return True
    except Exception: return False

def summary(db:Path) -> list[dict]:
    out, prev = defaultdict(lambda: dict(calls=0, prompt_tokens=0, completion_tokens=0, cut=0, read=0, parsed=0,
                                         gaps=[])), None
    for model, prompt, record, created in rows(db):
        rec, name = json.loads(record), (prompt or '?').split('@')[0]
        s = out[(model, name)]
        u = rec.get('usage') or {}
        s['calls'] += 1; s['prompt_tokens'] += u.get('prompt_tokens', 0); s['completion_tokens'] += u.get('completion_tokens', 0)
        if rec.get('finish_reason') == 'length': s['cut'] += 1
        elif (ok := readable(name, rec.get('text') or '')) is not None: s['parsed'] += 1; s['read'] += ok
        if prev is not None and 0 <= created - prev < 600: s['gaps'].append(created - prev)
        prev = created
    return [dict(lesson=db.stem, model=m, task=t, **{k: v for k, v in s.items() if k != 'gaps'},
                 s_per_call=statistics.median(s['gaps']) if s['gaps'] else None) for (m, t), s in sorted(out.items())]

dbs = [Path(p) for p in sys.argv[1:]] or sorted(p for p in (Path(__file__).parents[1]/'nbs'/'cache').glob('*.sqlite')
                                              if p.stem != 'regions')
print(f"{'lesson':15} {'model':36} {'task':24} {'calls':>5} {'prompt':>7} {'compl.':>6} {'cut':>3} {'read':>9} {'s/call':>6}")
every = []
for db in dbs:
    rows_ = summary(db)
    every += rows_
    for r in rows_:
        read = f"{r['read']}/{r['parsed']}" if r['parsed'] else '-'
        spc = f"{r['s_per_call']:.1f}" if r['s_per_call'] is not None else '-'
        print(f"{r['lesson']:15} {r['model'][:36]:36} {r['task'][:24]:24} {r['calls']:5} {r['prompt_tokens']:7} "
              f"{r['completion_tokens']:6} {r['cut']:3} {read:>9} {spc:>6}")

print("\nper model and task, over these lessons (read: replies the task's parser reads, of those not cut off)")
tot = defaultdict(lambda: defaultdict(float))
for r in every:
    t = tot[(r['model'], r['task'])]
    for k in ('calls', 'prompt_tokens', 'completion_tokens', 'cut', 'read', 'parsed'): t[k] += r[k]
for (m, task), t in sorted(tot.items()):
    if m.startswith('scripted'): continue
    read = f"{int(t['read'])}/{int(t['parsed'])} ({t['read'] / t['parsed']:.0%})" if t['parsed'] else '-'
    print(f"{m[:36]:36} {task[:24]:24} {int(t['calls']):5} calls {int(t['prompt_tokens']):7} prompt {int(t['completion_tokens']):6} "
          f"completion {int(t['cut']):3} cut  read {read}")
