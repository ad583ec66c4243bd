// The chat-template interpreter on its own: constructs with the output Python's jinja2 gives for them (each
// expectation was taken from jinja2 3.1), error messages with positions, and robustness on truncated templates.
// chat_template_reference_test.cpp compares against a live jinja2 on many more inputs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/template.h"
#include "test_paths.h"

namespace tessera::chat {
namespace {

using nlohmann::ordered_json;

std::string render(const std::string& source, const ordered_json& context = ordered_json::object()) {
  const Value ctx = from_json(context);
  return Template::parse(source).render(ctx.dict());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The message of the error a render throws, or "" when it renders.
template <typename E>
std::string error_of(const std::string& source, const ordered_json& context = ordered_json::object()) {
  try {
    render(source, context);
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplate, WhitespaceControlAsHuggingFaceConfiguresIt) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render("{% if true %}\n  yes\n{% endif %}\nend"), "  yes\nend");
  EXPECT_EQ(render("  {% if true %}x{% endif %}  \n"), "x  ");
  // "-" strips all white space on its side, "+" keeps what lstrip_blocks/trim_blocks would remove.
  EXPECT_EQ(render("a  \n  {{- 'b' -}}  \n  c"), "abc");
  EXPECT_EQ(render("  {%+ if true %}x{% endif +%}\ny"), "  x\ny");
  // Output tags are not trimmed by trim_blocks, and comments behave like blocks.
  EXPECT_EQ(render("{{ 'a' }}\n{# note #}\n  {# indented #}\nb"), "a\nb");
  // One trailing newline of the template is dropped; \r\n becomes \n.
  EXPECT_EQ(render("x\r\ny\n"), "x\ny");
}

TEST(ChatTemplate, LoopScopingAndNamespace) {
  // Each iteration starts from the outer variables; a set inside the loop does not survive it.
  EXPECT_EQ(render("{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}|{{ x }}"), "0102|0");
  // `if` shares the frame; namespace attributes survive the loop.
  EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "6");
  EXPECT_EQ(render("{{ namespace(a=1, b='x') }}"), "<Namespace {'a': 1, 'b': 'x'}>");
}

TEST(ChatTemplate, LoopVariablesFilterElseAndControls) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "103TrueFalse3;212FalseFalse3;321FalseTrue3;");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is odd %}{{ x }}{{ '.' if loop.last }}{% endfor %}"), "13.");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x is even %}{% continue %}"
                   "{% endif %}{{ x }}{% endfor %}"),
            "1");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }} {% endfor %}"), "a=1 b=[2] ");
  EXPECT_EQ(render("{% for a in [1,2] %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}"), "-2 1- ");
}

TEST(ChatTemplate, PythonPrintingOfValues) {
  EXPECT_EQ(render("{{ [1, 'a', None, True, 1.5, {'k': [1]}, ('t',)] }}"),
            "[1, 'a', None, True, 1.5, {'k': [1]}, ('t',)]");
  EXPECT_EQ(render(R"({{ ["it's", 'a"b', 'x\ny', '\x01', 'é', '😀', '\u00a0'] }})"),
            R"(["it's", 'a"b', 'x\ny', '\x01', 'é', '😀', '\xa0'])");
  EXPECT_EQ(render("{{ 1/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} "
                   "{{ 0.00001 }} {{ 3.14 }} {{ -0.0 }}"),
            "0.5 2.0 3 -4 2 1024 1e+16 1000000000000000.0 0.0001 1e-05 3.14 -0.0");
  EXPECT_EQ(render("{{ none }}{{ true }}{{ False }}{{ undefined_name }}|{{ 'a' ~ 1 ~ none ~ nothing }}"),
            "NoneTrueFalse|a1None");
  EXPECT_EQ(render("{{ {'a': 1}.items() }} {{ {'a': 1}.keys() }} {{ range(3) }} {{ range(1, 9, 3) | list }}"),
            "dict_items([('a', 1)]) dict_keys(['a']) range(0, 3) [1, 4, 7]");
}

TEST(ChatTemplate, StringsSlicesAndMethods) {
  EXPECT_EQ(render("{{ 'héllo'[::-1] }}|{{ 'héllo'[1] }}|{{ 'héllo'|length }}|{{ [1,2,3][1:] }}|{{ [1,2,3][-1] }}"),
            "olléh|é|5|[2, 3]|3");
  EXPECT_EQ(render("{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}|"
                   "{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}"),
            "x|a|x\n|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'aXa'.replace('a', 'b') }}"
                   "{{ 'ab'.upper() }}{{ 'hello world'.title() }}"),
            "TrueTruebXbABHello World");
  // Unicode white space is white space to Python's strip and to the trim filter.
  EXPECT_EQ(render("[{{ '\\u3000\\u00a0x\\u2028'|trim }}]"), "[x]");
}

TEST(ChatTemplate, FiltersAndTests) {
  const ordered_json ctx = {{"msgs", {{{"role", "user"}, {"content", "a"}}, {{"role", "bot"}, {"content", "b"}},
                                      {{"role", "user"}, {"content", "c"}}}}};
  EXPECT_EQ(render("{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('+') }}", ctx),
            "a+c");
  EXPECT_EQ(render("{{ msgs | rejectattr('role', 'eq', 'user') | list | length }}", ctx), "1");
  EXPECT_EQ(render("{{ ['a', 'code', 'b'] | reject('equalto', 'code') | join(', ') }}"), "a, b");
  EXPECT_EQ(render("{{ x | default('d') }}{{ '' | default('e', true) }}{{ [3,4] | first }}{{ [3,4] | last }}"), "de34");
  EXPECT_EQ(render("{{ '12' | int + 1 }} {{ '1.5' | int }} {{ 'x' | int(7) }} {{ '2.5' | float }}"), "13 1 7 2.5");
  EXPECT_EQ(render("{{ u is defined }}{{ u is undefined }}{{ u is iterable }}{{ 's' is iterable }}{{ 1 is number }}"
                   "{{ true is integer }}{{ none is none }}{{ {} is mapping }}{{ 3 is divisibleby 3 }}{{ 'a' is in 'cat' }}"),
            "FalseTrueTrueTrueTrueFalseTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 'a\\nb' | indent(2, true) }}|{{ 'ab' | reverse }}|{{ [1,2] | reverse | list }}"), "  a\n  b|ba|[2, 1]");
}

TEST(ChatTemplate, TojsonIsPythonJsonDumps) {
  const ordered_json ctx = {{"v", {{"b", 1}, {"a", {1.5, "é\n\"", nullptr, true}}, {"e", ordered_json::object()}}}};
  EXPECT_EQ(render("{{ v | tojson }}", ctx), R"({"b": 1, "a": [1.5, "é\n\"", null, true], "e": {}})");
  EXPECT_EQ(render("{{ v | tojson(indent=2, sort_keys=true) }}", ctx),
            "{\n  \"a\": [\n    1.5,\n    \"é\\n\\\"\",\n    null,\n    true\n  ],\n  \"b\": 1,\n  \"e\": {}\n}");
  EXPECT_EQ(render("{{ v.a | tojson(ensure_ascii=true, separators=(',', ':')) }}", ctx), R"([1.5,"\u00e9\n\"",null,true])");
}

TEST(ChatTemplate, RaiseExceptionAndStrftime) {
  EXPECT_EQ(error_of<RaisedError>("{{ raise_exception('Roles must alternate ' ~ 2) }}"), "Roles must alternate 2");
  RenderOptions fixed;
  fixed.now = [] { return std::chrono::system_clock::from_time_t(1721952000); };
  const std::string s = Template::parse("{{ strftime_now('%Y') }}").render(Dict(), fixed);
  EXPECT_EQ(s, "2024");
}

TEST(ChatTemplate, UnsupportedConstructsAreNamedWhenParsed) {
  auto syntax = [](const std::string& src) { return error_of<SyntaxError>(src); };
  EXPECT_EQ(syntax("a\n{% macro m() %}{% endmacro %}"),
            "chat template line 2, column 4: the 'macro' tag is not supported by the chat template interpreter");
  EXPECT_EQ(syntax("{{ x | safe }}"),
            "chat template line 1, column 8: the filter 'safe' is not supported by the chat template interpreter");
  EXPECT_EQ(syntax("{{ x | nosuch }}"), "chat template line 1, column 8: no filter named 'nosuch'");
  EXPECT_EQ(syntax("{% if x is escaped %}{% endif %}"),
            "chat template line 1, column 12: the test 'escaped' is not supported by the chat template interpreter");
  EXPECT_EQ(syntax("{% for x in y recursive %}{% endfor %}"),
            "chat template line 1, column 15: recursive loops are not supported by the chat template interpreter");
  EXPECT_EQ(syntax("{% raw %}x{% endraw %}"), "chat template line 1, column 1: the 'raw' tag is not supported");
  EXPECT_EQ(syntax("{% frobnicate %}"), "chat template line 1, column 4: unknown tag 'frobnicate'");
}

TEST(ChatTemplate, SyntaxErrorsCarryLineAndColumn) {
  auto syntax = [](const std::string& src) { return error_of<SyntaxError>(src); };
  EXPECT_EQ(syntax("ok\n{% if x %}\nyes"),
            "chat template line 3, column 4: unexpected end of template: expected 'elif' or 'else' or 'endif' to "
            "close the 'if' tag on line 2");
  EXPECT_EQ(syntax("{{ (1 + }}"), "chat template line 1, column 9: unexpected '}', expected ')'");
  EXPECT_EQ(syntax("{{ 'abc }}"), "chat template line 1, column 4: unterminated string literal");
  EXPECT_EQ(syntax("{# never closed"), "chat template line 1, column 1: missing end of comment tag");
  EXPECT_EQ(syntax("{% break %}"), "chat template line 1, column 4: 'break' outside of a loop");
  EXPECT_EQ(syntax("{{ a }}{% endif %}"), "chat template line 1, column 11: unexpected 'endif' (no open block it could close)");
  EXPECT_EQ(syntax("x\n  {{ é ? 1 }}"), "chat template line 2, column 8: unexpected character '?' (U+003F)");
  EXPECT_EQ(syntax(std::string("{{ '\xff' }}")), "chat template line 1, column 1: the template is not valid UTF-8");
}

TEST(ChatTemplate, RenderErrorsSayWhatPythonWouldSay) {
  auto err = [](const std::string& src, const ordered_json& ctx = ordered_json::object()) {
    return error_of<RenderError>(src, ctx);
  };
  EXPECT_EQ(err("\n{{ m.a.b }}", {{"m", ordered_json::object()}}), "chat template line 2: 'dict object' has no attribute 'a'");
  EXPECT_EQ(err("{{ u + 'a' }}"), "chat template line 1: 'u' is undefined");
  EXPECT_EQ(err("{{ 'a' + 1 }}"), "chat template line 1: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(err("{{ [1] | select('odd') }}"),
            "chat template line 1: printing a generator is not supported (Python prints its address); apply |list first");
  EXPECT_EQ(err("{{ [].append(1) }}"), "chat template line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(err("{{ 'x'.zfill(3) }}"),
            "chat template line 1: the str method 'zfill' is not supported by the chat template interpreter");
  EXPECT_EQ(err("{{ 'ÉCOLE'.lower() }}"),
            "chat template line 1: str.lower(): case mapping of non-ASCII letters is not supported (U+00C9)");
  EXPECT_EQ(err("{% set x = 'ab' * 40000000 %}"), "chat template line 1: the result would be larger than 67108864 bytes");
}

TEST(ChatTemplate, NestingIsBounded) {
  // Deep values would make printing, comparing and freeing them recurse without bound.
  EXPECT_EQ(error_of<RenderError>("{% set ns = namespace(x=[]) %}{% for i in range(300) %}{% set ns.x = [ns.x] %}"
                                  "{% endfor %}"),
            "chat template line 1: values nested deeper than 256 levels are not supported");
  EXPECT_EQ(error_of<RenderError>("{% set ns = namespace() %}{% set ns.x = [ns] %}{{ ns }}"),
            "chat template line 1: values nested deeper than 256 levels (or containing themselves) are not supported");
  std::string deep(300, '[');
  deep += std::string(300, ']');
  EXPECT_THROW(from_json(ordered_json::parse(deep)), Error);
  EXPECT_EQ(error_of<SyntaxError>("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}"),
            "chat template line 1, column 70: the template is nested too deeply");
}

// Slice steps and range bounds near the int64 limits: the index arithmetic overflowed (UBSan; in a release
// build a wrapped index read outside the string). Expectations from jinja2.
TEST(ChatTemplate, SlicesAndRangesNearTheInt64Limits) {
  EXPECT_EQ(render("{{ 'abc'[1::9223372036854775807] }}|{{ [1,2,3][1::9223372036854775807] }}|"
                   "{{ 'abc'[::-9223372036854775807-1] }}|{{ [1,2,3][-1:-5:-9223372036854775807] }}"),
            "b|[2]|c|[3]");
  EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5)|list }}"
                   "{{ range(-9223372036854775807-1, 9223372036854775807, 4611686018427387904)|list }}"
                   "{{ range(-9223372036854775800, -9223372036854775807-1, -5)|list }}"),
            "[9223372036854775800, 9223372036854775805][-9223372036854775808, -4611686018427387904, 0, "
            "4611686018427387904][-9223372036854775800, -9223372036854775805]");
}

// a + b + c, x|f|g, a.b.c, f()(), x if c if d: each operator wraps the tree built so far, without the parser
// recursing, so only the tree's own height (Expr::height) keeps evaluating and freeing it from overflowing the
// stack. A count of the parser's links, restored when each chain ended, missed chains inside chains (review).
TEST(ChatTemplate, LongOperatorChainsCountAsNesting) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  const std::string too_deep = "the template is nested too deeply";
  for (const std::string& chain : {repeat("1+", 100000) + "1", repeat("1*", 100000) + "1",
                                   "x" + repeat("|trim", 100000), "x" + repeat(".a", 100000), "x" + repeat("[0]", 100000),
                                   "range" + repeat("()", 100000), "x" + repeat(" is eq(1)", 100000),
                                   "1" + repeat(" if x", 100000), repeat("x and ", 100000) + "x"}) {
    const std::string error = error_of<SyntaxError>("{{ " + chain + " }}");
    EXPECT_NE(error.find(too_deep), std::string::npos) << chain.substr(0, 20) << ": " << error;
  }
  // Chains inside chains, and chains inside parentheses: every level of the tree counts, whichever loop built it.
  std::string mixed = "'a'";
  for (int i = 0; i < 190; ++i) mixed += repeat("|trim", 190 - i) + " is string";
  std::string parens = std::string(60, '(') + "1";  // (((1+1+...)+1+...)+1+...): 50 more levels per parenthesis
  for (int i = 0; i < 60; ++i) parens += repeat("+1", 50) + ")";
  for (const std::string& tree : {mixed, parens}) {
    const std::string error = error_of<SyntaxError>("{{ " + tree + " }}");
    EXPECT_NE(error.find(too_deep), std::string::npos) << tree.substr(0, 20) << ": " << error;
  }
  // Chains as long as templates write them are fine.
  EXPECT_EQ(render("{{ " + repeat("1+", 150) + "1 }}"), "151");
  EXPECT_EQ(render("{{ ' x '" + repeat("|trim", 150) + " }}"), "x");
}

// An empty list or tuple repeated any number of times is empty at once (the copy loop ran n times).
TEST(ChatTemplate, EmptySequencesRepeatAtOnce) {
  EXPECT_EQ(render("{{ [] * 9223372036854775807 }}|{{ (() * 9223372036854775807)|length }}|{{ [1] * 0 }}"),
            "[]|0|[]");
}

// Every operation that can multiply the size of its input stops at the string limit instead of allocating
// gigabytes (or throwing std::bad_alloc, which is no tessera::Error).
TEST(ChatTemplate, SizeLimitsCoverEveryOperationThatMultiplies) {
  const std::string too_large = "the result would be larger than 67108864 bytes";
  for (const char* source : {
           "{{ 'a'|indent(100000000000) }}",                                   // the indent string itself
           "{{ ('a\\n' * 1000)|indent(100000) }}",                              // lines × width
           "{{ [1]|tojson(indent=100000000000) }}",
           "{{ ([[[[[1]]]]] * 1000)|tojson(indent=20000) }}",                   // levels × indent × lines
           "{% set x = ('a' * 100)|replace('', 'b' * 1000000) %}",              // around every character
           "{% set x = ('a' * 1000)|replace('a', 'b' * 100000) %}",
           "{% set x = ('a' * 100).replace('a', 'b' * 1000000) %}",
           "{% set x = ('b' * 1000000).join('a' * 100) %}",                     // the separator between many items
           "{% set ns = namespace(x=[1]) %}{% for i in range(40) %}{% set ns.x = ns.x + ns.x %}{% endfor %}",
           "{% set x = (['x' * 1000000] * 100)|string %}",                      // printing shares nothing
           "{% set x = (['x' * 1000000] * 100)|tojson %}",
           "{% set x = ('x' * 3000000)|list %}",                                // one value per character
           "{% set x = ('xy' * 30000000).split('y') %}",                        // one value per part
           "{% set x = ('x ' * 30000000).split() %}",
           "{% set x = ('x\\n' * 30000000).splitlines() %}",
       }) {
    EXPECT_EQ(error_of<RenderError>(source), "chat template line 1: " + too_large) << source;
  }
}

// Loops and scans that would hold a thread for hours spend the render's work budget and fail.
TEST(ChatTemplate, WorkBudgetStopsRunawayTemplates) {
  const std::string spent =
      "the template did more work than a render may do (33554432 units: loops, expressions, bytes of text)";
  EXPECT_EQ(error_of<RenderError>("\n{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
            "chat template line 2: " + spent);
  EXPECT_EQ(error_of<RenderError>("{% set b = 'x' * 60000000 %}{% for i in range(1000) %}{% if b|length %}{% endif %}"
                                  "{% endfor %}"),
            "chat template line 1: " + spent);
  // The budget is per render, and the caller can choose it.
  const Template nested = Template::parse("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}");
  RenderOptions small;
  small.max_work = 100000;
  EXPECT_THROW(nested.render(Dict(), small), RenderError);
  EXPECT_EQ(nested.render(Dict()), "");
  EXPECT_EQ(nested.render(Dict()), "");
}

// Substring search (in, find, count, split, rsplit, replace) and strip(chars) take time linear in the text
// whatever the pattern: a plain search for 'aa…ab' in 'aaa…' compares text × pattern bytes.
// A short pattern in a run of one repeated byte compares at every position (~7 ns a byte): three searches of 'aaab'
// in 60 MB of 'a' spend the budget (charged as code points), where a charge of 1/16 unit a byte let a render
// run for seconds.
TEST(ChatTemplate, ShortPatternSearchesChargeWhatTheyScan) {
  const std::string error = error_of<RenderError>(
      "{% set big = 'a' * 60000000 %}{% for i in range(3) %}{{ 'aaab' in big }}{% endfor %}");
  EXPECT_NE(error.find("did more work than a render may do"), std::string::npos) << error;
  EXPECT_EQ(render("{% set big = 'a' * 60000 %}{% for i in range(3) %}{{ 'aaab' in big }}{% endfor %}"),
            "FalseFalseFalse");
}

TEST(ChatTemplate, SubstringSearchIsLinear) {
  const std::string big = "{% set t = 'a' * 10000000 %}{% set p = 'a' * 200000 ~ 'b' %}";
  EXPECT_EQ(render(big + "{{ p in t }}{{ t.find(p) }}{{ t.count(p) }}{{ t.split(p)|length }}{{ t.rsplit(p)|length }}"
                         "{{ t.replace(p, 'x') == t }}"),
            "False-1011True");
  EXPECT_EQ(render(big + "{{ (t ~ p).find(p) }} {{ (p ~ t ~ p).rsplit(p)|map('length')|list }} {{ t.strip(p)|length }}"),
            "10000000 [0, 10000000, 0] 0");
  // The long-pattern search agrees with Python on overlapping and repeated separators.
  EXPECT_EQ(render("{% set s = 'ab' * 20 %}{{ (s * 3 ~ 'a').split(s) }}|{{ ('x' ~ s * 3 ~ 'a').rsplit(s, 1)|map('length')|list }}|"
                   "{{ (s * 5).count(s * 2) }}|{{ ('c' ~ s ~ 'c' ~ s).find(s) }}|{{ ('c' ~ s ~ 'c' ~ s).replace(s, '-') }}|"
                   "{{ ('a' * 50).rsplit('a' * 40) }}|{{ ('a' * 50).split('a' * 40) }}"),
            "['', '', '', 'a']|[81, 1]|2|1|c-c-|['aaaaaaaaaa', '']|['', 'aaaaaaaaaa']");
}

// Past 16 keys a dict is indexed: lookups, replacement, order and copies behave as before.
TEST(ChatTemplate, LargeDictsKeepPythonSemantics) {
  ordered_json ctx = {{"d", ordered_json::object()}};
  for (int i = 0; i < 1000; ++i) ctx["d"]["k" + std::to_string(999 - i)] = i;
  EXPECT_EQ(render("{{ d.k0 }} {{ d['k999'] }} {{ d.get('k500') }} {{ 'k3' in d }} {{ 'k1000' in d }} {{ d|length }} "
                   "{{ (d|list)[:3] }} {{ d.nope is defined }}", ctx),
            "999 0 499 True False 1000 ['k999', 'k998', 'k997'] False");
  EXPECT_EQ(render("{% set e = dict(d, k0='new', extra=1) %}{{ e.k0 }} {{ d.k0 }} {{ e|length }} {{ (e|list)[-1] }} "
                   "{{ dict(d.items() | list + [('k5', 'x')])['k5'] }} {{ dict(d.items())|length }}", ctx),
            "new 999 1001 extra x 1000");
  EXPECT_EQ(render("{% set ns = namespace(d) %}{% for i in range(40) %}{% set ns.k7 = ns.k7 + i %}{% set ns.n = i %}"
                   "{% endfor %}{{ ns.k7 }} {{ ns.n }} {{ ns.k999 }}", ctx),
            "1772 39 0");
}

// Every prefix of every real template either renders or throws a tessera::Error: truncated input must never
// crash the interpreter (run under the sanitizer build too).
TEST(ChatTemplate, TruncatedTemplatesFailCleanly) {
  std::vector<std::string> sources;
  for (const char* name : {"Qwen-Qwen2.5-7B-Instruct.jinja", "google-gemma-2-2b-it.jinja",
                           "meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja",
                           "microsoft-Phi-3.5-mini-instruct.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja"})
    sources.push_back(read_file(testing::shared_path(std::string("chat-templates/") + name)));
  sources.push_back(nlohmann::json::parse(read_file(testing::shared_path("chat-templates/qwen3-tokenizer_config.json")))
                        ["chat_template"].get<std::string>());
  const Value ctx = from_json(ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                 {"role": "assistant", "content": "<think>r</think>A"}, {"role": "user", "content": "V"}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "tools": null})"));
  size_t n_rendered = 0, n_failed = 0;
  for (const std::string& source : sources) {
    ASSERT_FALSE(source.empty());
    for (size_t len = 0; len <= source.size(); ++len) {
      try {
        Template::parse(source.substr(0, len)).render(ctx.dict());
        ++n_rendered;
      } catch (const Error&) {
        ++n_failed;
      }
    }
  }
  EXPECT_GT(n_rendered, 0u);
  EXPECT_GT(n_failed, 0u);
}

}  // namespace
}  // namespace tessera::chat
