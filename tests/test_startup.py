"Start-up: importing a stage and a command's --help load none of the big libraries a stage needs on one path only."
import gc, json, subprocess, sys
import pytest
from ragnb.app.cli import COMMANDS
from ragnb.core.schema import follows_schema, schema_error
from ragnb.check.metrics import CheckingDataError, score

HEAVY = ('jsonschema', 'openai', 'pandas', 'langchain_text_splitters', 'scipy', 'matplotlib', 'aiohttp', 'bm25s')
LIGHT = ['generate', 'check', 'metrics', 'regions', 'retrieval', 'meta-eval', 'run', 'compare']  # commands whose --help is light

def loaded_after(code, mods=HEAVY):
    "The modules of `mods` (the HEAVY libraries) loaded by a fresh interpreter after running `code`."
    probe = f"import sys\n{code}\nprint(__import__('json').dumps([m for m in {tuple(mods)!r} if m in sys.modules]))"
    r = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-800:]
    return json.loads(r.stdout.splitlines()[-1])

@pytest.mark.parametrize('mod', ['ragnb.synth.generate', 'ragnb.check.checker', 'ragnb.docs.pdf', 'ragnb.check.metrics', 'ragnb.app.cli'])
def test_import_loads_no_heavy_library(mod):
    assert loaded_after(f'import {mod}') == []

def help_code(command):
    "Code that prints `ragnb <command> --help` into a buffer and checks it is that command's usage."
    return ("import contextlib, io\nfrom ragnb.app.cli import main\nout = io.StringIO()\n"
            f"with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit): main([{command!r}, '--help'])\n"
            f"assert out.getvalue().startswith('usage: ragnb {command}'), out.getvalue()[:200]")

@pytest.mark.parametrize('command', LIGHT)
def test_command_help_loads_no_heavy_library(command):
    assert command in COMMANDS
    assert loaded_after(help_code(command)) == []

def test_ragnb_schemas_checked_without_jsonschema():
    code = ("from ragnb.core.schema import follows_schema\nfrom ragnb.synth.generate import QA_SCHEMA, RATING_SCHEMA\n"
            "from ragnb.check.checker import LABELS_SCHEMA, claims_schema\n"
            "assert follows_schema('{\"question\": \"q\", \"answer\": \"a\"}', QA_SCHEMA)\n"
            "assert follows_schema('{\"evaluation\": \"e\", \"total_rating\": 4}', RATING_SCHEMA) is None\n"
            "assert follows_schema('{\"labels\": [{\"claim\": 1, \"label\": \"Maybe\"}]}', LABELS_SCHEMA)\n"
            "assert follows_schema('{\"claims\": [[\"a\", \"b\"]]}', claims_schema('triplet'))")
    assert 'jsonschema' not in loaded_after(code)

TRIPLETS = {'type':'object', 'required':['claims'], 'additionalProperties':False, 'properties':{'claims':{
            'type':'array', 'items':{'type':'array', 'items':{'type':'string'}, 'minItems':3, 'maxItems':3}}}}
NUMBERS = {'type':'object', 'properties':{'n':{'type':'integer', 'minimum':1, 'maximum':5},
           'x':{'type':['number', 'null']}, 's':{'type':'string', 'minLength':2, 'maxLength':3},
           'b':{'type':'boolean', 'enum':[True]}}}
VALUES = [{'claims':[['a', 'b', 'c']]}, {'claims':[['a', 'b']]}, {'claims':[['a', 'b', 'c', 'd']]},
          {'claims':[['a', 2, 'c']]}, {'claims':[]}, {'claims':'abc'}, {}, {'claims':[], 'extra':1}, [], 'x', None,
          {'n':3}, {'n':0}, {'n':6}, {'n':2.0}, {'n':2.5}, {'n':True}, {'x':None}, {'x':1.5}, {'x':'1'},
          {'s':'a'}, {'s':'abcd'}, {'s':'ab'}, {'b':1}, {'b':True}, {'b':False}]

@pytest.mark.parametrize('schema', [TRIPLETS, NUMBERS])
def test_schema_error_agrees_with_jsonschema(schema):
    jsonschema = pytest.importorskip('jsonschema')
    for v in VALUES:
        assert (schema_error(v, schema) is None) == jsonschema.Draft202012Validator(schema).is_valid(v), v

def test_schema_error_names_the_place():
    assert schema_error({'claims':[['a', 2, 'c']]}, TRIPLETS) == "2 is not of type 'string' at claims[0][1]"
    assert schema_error({}, TRIPLETS) == "'claims' is a required property"
    assert 'was unexpected' in follows_schema('{"claims": [], "extra": 1}', TRIPLETS)

def test_other_keywords_go_to_jsonschema():
    pytest.importorskip('jsonschema')
    s = {'type':'object', 'properties':{'id':{'type':'string', 'pattern':'^q[0-9]+$'}}}
    assert follows_schema('{"id": "q12"}', s) is None
    assert 'does not match' in follows_schema('{"id": "x"}', s)

def test_score_leaves_the_garbage_collector_as_it_was():
    bad = [{'query_id':'1', 'answer2response':['Maybe'], 'response2answer':[], 'retrieved2response':[[]],
            'retrieved2answer':[], 'retrieved_context':[]}]
    assert gc.isenabled()
    with pytest.raises(CheckingDataError): score(bad, strict=True)
    assert gc.isenabled()
    gc.disable()
    try:
        score(bad[:0])
        assert not gc.isenabled()
    finally: gc.enable()

@pytest.mark.parametrize('command', ['regions', 'parse', 'local'])
def test_commands_that_judge_nothing_load_no_judge(command):
    "A command that judges and critiques nothing does not load the checking and test-set rooms for its --help."
    assert loaded_after(help_code(command), ('ragnb.check.checker', 'ragnb.synth.generate')) == []
