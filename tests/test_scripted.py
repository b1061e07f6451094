"The scripted server answers by a prompt's registered name and version and the inputs that filled it, never its wording."
import contextlib, dataclasses, string
import openai, pytest
from ragnb.core.llm import LLM, Retries
from ragnb.core.prompts import PROMPTS, DEFAULT_AUDIENCE, get_prompt, register
from ragnb.check.checker import numbered, run_checks
from ragnb.docs.documents import load_folder
from ragnb.core.samples import sample_path
from ragnb.synth.generate import generate_dataset
from ragnb.testing.scripted import ScriptedServer

PASSAGE = ("The Nile is a river in Africa. It flows north into the Mediterranean Sea, and it is about 6,650 km long. "
           "The Aswan High Dam, finished in 1970, controls its floods.")
CLAIMS = ['The Nile flows north.', 'The Nile is in Asia.', 'The Aswan High Dam was finished in 1970.']
QUESTION = 'Where does the Nile flow?'
CASES = {  # prompt: its inputs, as ragnb fills them
    'factoid_qa': dict(context=PASSAGE, language='English'),
    'critique_groundedness': dict(question=QUESTION, context=PASSAGE),
    'critique_relevance': dict(question='How do I stream responses from the OpenAI API?', audience=DEFAULT_AUDIENCE),
    'critique_standalone': dict(question='What does the document say about the dam?'),
    'critique_single_hop': dict(question=QUESTION, context=PASSAGE),
    'chunk_entities': dict(context=PASSAGE, max_n=5),
    'propose_personas': dict(n=2, digest='- Embeddings guide: vector search, retrieval\n- Evals: quality tests'),
    'extract_claims_triplet': dict(question=QUESTION, text=PASSAGE),
    'extract_claims_sentence': dict(question=QUESTION, text=PASSAGE),
    'check_claims': dict(question=QUESTION, reference=PASSAGE, claims=numbered(CLAIMS, range(3)), n=3),
    'judge_claim_binary': dict(question=QUESTION, reference=PASSAGE, claim=CLAIMS[0]),
    'judge_claim_binary_example': dict(question=QUESTION, reference=PASSAGE, claim=CLAIMS[1]),
    'judge_claim_last': dict(question=QUESTION, reference=PASSAGE, claim=CLAIMS[0]),
    'judge_claim_3way': dict(question=QUESTION, reference=PASSAGE, claim=CLAIMS[2]),
    'rag_answer': dict(question='How long is the Nile river?', context='[1] (nile.md)\n' + PASSAGE),
    'pdf_page': dict(labels='report_3_1.png, report_3_2.png'),
}

def _reword(p):
    "`p` in other words: a new first line, other words in every literal part, another system message; same fields."
    parts = []
    for lit, f, spec, conv in string.Formatter().parse(p.template):
        lit = lit.replace(' the ', ' THE ').replace('Reply', 'Respond').replace(':\n', ' here:\n')
        parts.append(lit.replace('{', '{{').replace('}', '}}'))
        if f is not None: parts.append('{' + f + (f'!{conv}' if conv else '') + (f':{spec}' if spec else '') + '}')
    return dataclasses.replace(p, template='Some new instructions come first.\n' + ''.join(parts),
                               system=p.system and 'You are a different assistant, worded differently.')

@contextlib.contextmanager
def reworded(*names):
    "The registry with prompts `names` reworded (same name and version), restored afterwards."
    old = {n: PROMPTS[n] for n in names}
    try:
        for p in old.values(): register(_reword(p))
        yield
    finally: PROMPTS.update(old)

def _llm(srv, max_retries=None):
    return LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache=False, progress=False,
               retries=Retries(max_retries=max_retries, backoff=0.01))

def _ask(llm, name, **inputs):
    p = get_prompt(name)   # as ragnb does: the registered prompt, filled
    return llm.call(p.messages(**inputs), prompt=p)

@pytest.mark.parametrize('name', sorted(CASES))
def test_a_reworded_prompt_gets_the_same_reply(name):
    with ScriptedServer() as srv:
        llm = _llm(srv)
        before = _ask(llm, name, **CASES[name])
        with reworded(name): after = _ask(llm, name, **CASES[name])
        sent = [q['body']['messages'] for q in srv.requests]
    assert before.ok and after.ok, (before.failure, after.failure)
    assert sent[0] != sent[1] and 'Some new instructions' in sent[1][-1]['content']   # the wording did change
    assert before.text == after.text                                                   # the reply did not

def test_reworded_follow_up_turns_get_the_same_replies():
    "A conversation's later turns (another question, a repair) read their first turn by the registered prompts too."
    def conversation(llm):
        out = []
        first = get_prompt('factoid_qa').messages(**CASES['factoid_qa'])
        r1 = llm.call(first, prompt=get_prompt('factoid_qa'))
        nxt = get_prompt('factoid_qa_next')
        r2 = llm.call(first + [{'role':'assistant', 'content':r1.text}, {'role':'user', 'content':nxt.render()}],
                      prompt=nxt)
        out += [r1.text, r2.text]
        for name in ('check_claims', 'extract_claims_sentence'):
            m = get_prompt(name).messages(**CASES[name])
            bad = m + [{'role':'assistant', 'content':'not JSON'},
                       {'role':'user', 'content':get_prompt('repair_json').render(problem='no JSON object')}]
            out.append(llm.call(bad, prompt=get_prompt('repair_json')).text)
        return out
    with ScriptedServer() as srv:
        llm = _llm(srv)
        before = conversation(llm)
        with reworded('factoid_qa', 'factoid_qa_next', 'check_claims', 'extract_claims_sentence', 'repair_json'):
            after = conversation(llm)
    assert all(before) and before == after
    assert before[0] != before[1]                                  # the follow-up asked about another sentence
    assert '"labels"' in before[2] and '"claims"' in before[3]     # each repair re-answered its own first turn

def test_generation_and_checking_give_the_same_results_in_other_words(tmp_path):
    "End to end: the questions, scores, claims and labels of a run do not move when every prompt is reworded."
    docs = load_folder(sample_path('openai-cookbook'), glob='CONTRIBUTING.md')
    names = ['factoid_qa', 'critique_groundedness', 'critique_relevance', 'critique_standalone',
             'extract_claims_triplet', 'check_claims', 'repair_json']
    def run():
        with ScriptedServer() as srv:
            ds = generate_dataset(docs, _llm(srv), max_chunks=3)
            rows = [dict(query_id=str(i), query=r.question, gt_answer=r.answer, response=r.evidence,
                         retrieved_context=[{'doc_id': 'd', 'text': PASSAGE}]) for i, r in ds.df.iterrows()]
            checked = run_checks(rows, _llm(srv))
        cols = ['question', 'answer', 'evidence', 'groundedness_score', 'relevance_score', 'standalone_score']
        return ds.df[cols].to_dict('records'), [(r.response_claims, r.answer2response, r.retrieved2response)
                                                for r in checked.results]
    before = run()
    with reworded(*names): after = run()
    assert before[0] and before[1] and before == after

def test_a_version_the_registry_does_not_hold_is_a_visible_error():
    p = get_prompt('factoid_qa')
    with ScriptedServer() as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key='sk-test', max_retries=0)
        with pytest.raises(openai.InternalServerError, match=r"factoid_qa@0.*registered prompt is 'factoid_qa@1'"):
            client.chat.completions.create(model='m', messages=p.messages(**CASES['factoid_qa']),
                                           extra_headers={'X-Ragnb-Prompt': 'factoid_qa@0'})
        r = _llm(srv, max_retries=0).call(p.messages(**CASES['factoid_qa']), prompt='factoid_qa@0')
    assert not r.ok and "registered prompt is 'factoid_qa@1'" in r.failure.message

def test_a_message_that_is_not_the_named_prompt_is_refused_and_a_plain_chat_is_answered():
    with ScriptedServer() as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key='sk-test', max_retries=0)
        with pytest.raises(openai.BadRequestError, match='check_claims@1'):
            client.chat.completions.create(model='m', messages=[{'role':'user', 'content':'Label these, please.'}],
                                           extra_headers={'X-Ragnb-Prompt': 'check_claims@1'})
        plain = client.chat.completions.create(model='m', messages=[{'role':'user', 'content':'hello there'}])
    assert plain.choices[0].message.content == 'Hello! How can I help you today?'
