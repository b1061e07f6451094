"Markdown reprs show text literally: a dollar amount must not turn into LaTeX, model text must not turn into markup."
import re
from ragnb.llm import Usage, md_escape

UNESCAPED_DOLLAR = re.compile(r'(?<!\\)\$')


def test_usage_markdown_escapes_dollars():
    md = Usage(calls=2, cached=3, cost=0.0, saved_tokens=71021, saved_cost=0.0)._repr_markdown_()
    assert '\\$0.0000' in md and '(\\$0.0000)' in md
    assert not UNESCAPED_DOLLAR.search(md)  # an even number of bare '$' renders the text between them as math
    assert str(Usage(cost=1.5)) .count('$') == 1 and '$1.5000' in str(Usage(cost=1.5))  # plain text keeps the sign


def test_md_escape_keeps_text_literal():
    assert md_escape('costs $3 and $4') == 'costs \\$3 and \\$4'
    assert md_escape('<b>x</b> *a* _b_ `c` [d](e) # f | g ~h~') == (
        '&lt;b&gt;x&lt;/b&gt; \\*a\\* \\_b\\_ \\`c\\` \\[d\\](e) \\# f \\| g \\~h\\~')
    assert md_escape('back\\slash') == 'back\\\\slash'
