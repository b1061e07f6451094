"""Markdown reprs show text literally: a dollar amount must not turn into LaTeX, model text must not turn into markup.
`tests/browser` checks the same in JupyterLab (the workshop's `llm.usage` shows '$0.0000', no MathJax)."""
import re
from ragnb.core.display import md_escape
from ragnb.core.calls import Usage


def _dollars_reaching_mathjax(md:str) -> list:
    "The backslashes before each `$` once markdown has unescaped them: MathJax shows a `$` as text only after one `\\`."
    return [len(m.group(1)) // 2 for m in re.finditer(r'(\\*)\$', md)]


def test_usage_markdown_escapes_dollars():
    md = Usage(calls=2, cached=3, cost=0.0, saved_tokens=71021, saved_cost=0.0)._repr_markdown_()
    assert '0.0000; the cache saved 71,021 tokens (' in md
    assert _dollars_reaching_mathjax(md) == [1, 1]  # both amounts reach MathJax as '\$': shown as dollar signs
    assert str(Usage(cost=1.5)).count('$') == 1 and '$1.5000' in str(Usage(cost=1.5))  # plain text keeps the sign


def test_md_escape_keeps_text_literal():
    assert md_escape('costs $3 and $4') == r'costs \\$3 and \\$4'
    assert md_escape('<b>x</b> *a* _b_ `c` [d](e) # f | g ~h~') == (
        r'&lt;b&gt;x&lt;/b&gt; \*a\* \_b\_ \`c\` \[d\](e) \# f \| g \~h\~')
    assert md_escape('back\\slash') == r'back\\slash'


def test_escaped_dollars_survive_nbconvert_markdown():
    "nbconvert's markdown renderer turns the escape into '\\$', which its MathJax (processEscapes) shows as '$'."
    import nbformat
    from nbconvert import HTMLExporter
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('llm.usage')
    cell.outputs = [nbformat.v4.new_output('execute_result', execution_count=1,
                                           data={'text/markdown': Usage(cost=0.25)._repr_markdown_(), 'text/plain': 'Usage'})]
    nb.cells = [cell]
    page = HTMLExporter().from_notebook_node(nb)[0]
    assert '\\$0.2500' in page and 'processEscapes: true' in page
