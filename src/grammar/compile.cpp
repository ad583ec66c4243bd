// Compiling a GrammarIR: rule analysis (what is recursive, what is small enough to copy), Thompson NFAs over
// bytes, byte classes, subset construction per rule, then the checks and pruning the matcher relies on.
#include "grammar/compile.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "grammar/grammar_error.h"
#include "grammar/utf8_sequences.h"

namespace tessera::grammar {

uint64_t CompiledGrammar::bytes() const {
  uint64_t n = sizeof(*this) + next_.size() * sizeof(int32_t) + flags_.size() + call_begin_.size() * 4 +
               calls_.size() * sizeof(Call) + rule_starts_.size() * 4;
  for (const std::string& s : rule_names_) n += s.size() + sizeof(s);
  return n;
}

namespace {

struct NfaEdge {
  uint8_t lo, hi;
  int32_t to;
};
struct NfaCall {
  int32_t rule;
  int32_t to;
};

struct VectorHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int32_t x : v) h = (h ^ uint32_t(x)) * 0x100000001b3ull;
    return size_t(h);
  }
};

// The rules reachable from the root, which of them are recursive, how big each would be if copied inline.
class RuleAnalysis {
 public:
  RuleAnalysis(const GrammarIR& ir, const CompileLimits& limits) : ir_(ir), limits_(limits) {
    const size_t n = ir.rules().size();
    refs_.resize(n);
    ref_count_.assign(n, 0);
    reachable_.assign(n, false);
    recursive_.assign(n, false);
    estimate_.assign(n, -1);
    if (ir.root < 0 || size_t(ir.root) >= n) grammar_fail("the grammar has no root rule");
    // Reachable rules, and who references whom.
    std::vector<int32_t> stack{ir.root};
    reachable_[size_t(ir.root)] = true;
    while (!stack.empty()) {
      const int32_t r = stack.back();
      stack.pop_back();
      const Rule& rule = ir.rules()[size_t(r)];
      if (rule.body < 0) grammar_fail("rule '{}' is used but never defined", rule.name);
      collect_refs(rule.body, refs_[size_t(r)]);
      for (int32_t s : refs_[size_t(r)]) {
        ++ref_count_[size_t(s)];
        if (!reachable_[size_t(s)]) {
          reachable_[size_t(s)] = true;
          stack.push_back(s);
        }
      }
    }
    mark_recursive();
  }

  bool reachable(int32_t r) const { return reachable_[size_t(r)]; }
  bool inlined(int32_t r, int depth = 0) const {
    if (r == ir_.root || recursive_[size_t(r)] || ir_.rules()[size_t(r)].shared) return false;
    return ref_count_[size_t(r)] <= 1 || rule_estimate(r, depth) <= int64_t(limits_.inline_states);
  }

 private:
  // Each reference once per occurrence (a rule named twice in a body counts twice: copying it costs twice).
  void collect_refs(ExprId root, std::vector<int32_t>& out) const {
    std::vector<ExprId> todo{root};
    while (!todo.empty()) {
      const Expr& e = ir_.expr(todo.back());
      todo.pop_back();
      if (e.kind == ExprKind::Ref) out.push_back(e.rule);
      for (ExprId c : e.items) todo.push_back(c);
    }
  }

  // Tarjan's strongly connected components, iteratively (grammars may have thousands of rules).
  void mark_recursive() {
    const size_t n = ir_.rules().size();
    std::vector<int32_t> index(n, -1), low(n, 0);
    std::vector<bool> on_stack(n, false);
    std::vector<int32_t> scc;
    int32_t counter = 0;
    struct Frame {
      int32_t rule;
      size_t next;
    };
    for (size_t start = 0; start < n; ++start) {
      if (!reachable_[start] || index[start] >= 0) continue;
      std::vector<Frame> frames{{int32_t(start), 0}};
      index[start] = low[start] = counter++;
      scc.push_back(int32_t(start));
      on_stack[start] = true;
      while (!frames.empty()) {
        Frame& f = frames.back();
        const auto& out = refs_[size_t(f.rule)];
        if (f.next < out.size()) {
          const int32_t s = out[f.next++];
          if (s == f.rule) recursive_[size_t(s)] = true;
          if (index[size_t(s)] < 0) {
            index[size_t(s)] = low[size_t(s)] = counter++;
            scc.push_back(s);
            on_stack[size_t(s)] = true;
            frames.push_back({s, 0});
          } else if (on_stack[size_t(s)]) {
            low[size_t(f.rule)] = std::min(low[size_t(f.rule)], index[size_t(s)]);
          }
          continue;
        }
        const int32_t r = f.rule;
        frames.pop_back();
        if (!frames.empty()) low[size_t(frames.back().rule)] = std::min(low[size_t(frames.back().rule)], low[size_t(r)]);
        if (low[size_t(r)] == index[size_t(r)]) {
          std::vector<int32_t> members;
          int32_t m;
          do {
            m = scc.back();
            scc.pop_back();
            on_stack[size_t(m)] = false;
            members.push_back(m);
          } while (m != r);
          if (members.size() > 1)
            for (int32_t x : members) recursive_[size_t(x)] = true;
        }
      }
    }
  }

  static int64_t sat_add(int64_t a, int64_t b) { return std::min<int64_t>(a + b, int64_t(1) << 40); }
  static int64_t sat_mul(int64_t a, int64_t b) {
    return a != 0 && b > (int64_t(1) << 40) / a ? int64_t(1) << 40 : a * b;
  }

  int64_t rule_estimate(int32_t r, int depth = 0) const {
    if (estimate_[size_t(r)] < 0) estimate_[size_t(r)] = expr_estimate(ir_.rules()[size_t(r)].body, depth);
    return estimate_[size_t(r)];
  }

  // NFA states the expression would take if built inline (an overestimate; saturating). Depth-limited like
  // Compiler::build (a chain of 60000 GBNF '?' is a 60000-deep expression).
  int64_t expr_estimate(ExprId id, int depth) const {
    if (depth > 1000) grammar_fail("the grammar nests too deeply");
    const Expr& e = ir_.expr(id);
    switch (e.kind) {
      case ExprKind::Empty: return 0;
      case ExprKind::Literal: return int64_t(e.text.size());
      case ExprKind::Chars:
      case ExprKind::JsonChars: return 1 + 3 * int64_t(std::min<size_t>(e.chars.ranges().size(), 1000));
      case ExprKind::Seq:
      case ExprKind::Alt: {
        int64_t n = 1;
        for (ExprId c : e.items) n = sat_add(n, expr_estimate(c, depth + 1));
        return n;
      }
      case ExprKind::Repeat: {
        const int64_t copies = e.max == kUnbounded ? std::max(e.min, 1) : e.max;
        return sat_add(2, sat_mul(std::max<int64_t>(copies, 1), expr_estimate(e.items[0], depth + 1)));
      }
      case ExprKind::Ref: return inlined(e.rule, depth + 1) ? rule_estimate(e.rule, depth + 1) : 1;
    }
    return 1;
  }

  const GrammarIR& ir_;
  const CompileLimits& limits_;
  std::vector<std::vector<int32_t>> refs_;
  std::vector<int32_t> ref_count_;
  std::vector<bool> reachable_;
  std::vector<bool> recursive_;
  mutable std::vector<int64_t> estimate_;
};

}  // namespace

class Compiler {
 public:
  Compiler(const GrammarIR& ir, const CompileLimits& limits) : ir_(ir), limits_(limits), rules_(ir, limits) {}

  CompiledGrammar run() {
    const size_t n_rules = ir_.rules().size();
    std::vector<int32_t> nfa_start(n_rules, -1), nfa_end(n_rules, -1);
    for (size_t r = 0; r < n_rules; ++r) {
      if (!rules_.reachable(int32_t(r)) || rules_.inlined(int32_t(r))) continue;
      nfa_start[r] = new_state();
      nfa_end[r] = build(ir_.rules()[r].body, nfa_start[r], 0);
    }
    compute_byte_classes();
    g_.root_ = ir_.root;
    g_.rule_starts_.assign(n_rules, -1);
    for (size_t r = 0; r < n_rules; ++r) g_.rule_names_.push_back(ir_.rules()[r].name);
    for (size_t r = 0; r < n_rules; ++r) {
      if (nfa_start[r] < 0) continue;
      current_end_ = nfa_end[r];
      std::vector<int32_t> seed{nfa_start[r]};
      g_.rule_starts_[r] = dfa_state(closure(seed));
      while (next_unbuilt_ < sets_.size()) expand(int32_t(next_unbuilt_++));
    }
    finish_tables();
    check_and_prune();
    return std::move(g_);
  }

 private:
  // ---- NFA ----
  int32_t new_state() {
    if (bytes_.size() >= limits_.max_nfa_states)
      grammar_fail("the grammar is too large: more than {} automaton states before determinization (bounded "
                   "repetitions multiply their contents)",
                   limits_.max_nfa_states);
    bytes_.emplace_back();
    eps_.emplace_back();
    calls_.emplace_back();
    return int32_t(bytes_.size() - 1);
  }
  void add_eps(int32_t from, int32_t to) { eps_[size_t(from)].push_back(to); }
  void add_byte(int32_t from, uint8_t lo, uint8_t hi, int32_t to) { bytes_[size_t(from)].push_back({lo, hi, to}); }

  // Builds `id` starting at state `from`; returns the state reached after it. Only ever adds edges out of
  // `from` and among new states, so alternatives built from the same state cannot leak into one another.
  int32_t build(ExprId id, int32_t from, int depth) {
    if (depth > 1000) grammar_fail("the grammar nests too deeply");
    const Expr& e = ir_.expr(id);
    switch (e.kind) {
      case ExprKind::Empty: return from;
      case ExprKind::Literal: {
        int32_t cur = from;
        for (char c : e.text) {
          const int32_t next = new_state();
          add_byte(cur, uint8_t(c), uint8_t(c), next);
          cur = next;
        }
        return cur;
      }
      case ExprKind::Chars: {
        const int32_t end = new_state();
        add_sequences(from, utf8_sequences(e.chars), end);
        return end;
      }
      case ExprKind::JsonChars: {
        const int32_t end = new_state();
        add_json_chars(from, e.chars, end);
        return end;
      }
      case ExprKind::Seq: {
        int32_t cur = from;
        for (ExprId c : e.items) cur = build(c, cur, depth + 1);
        return cur;
      }
      case ExprKind::Alt: {
        const int32_t end = new_state();
        for (ExprId c : e.items) {
          // Each branch from a fresh state: a branch that loops back to its start must not loop to `from`.
          const int32_t start = new_state();
          add_eps(from, start);
          add_eps(build(c, start, depth + 1), end);
        }
        return end;
      }
      case ExprKind::Repeat: {
        int32_t cur = from;
        for (int32_t i = 0; i < e.min; ++i) {
          const int32_t start = new_state();
          add_eps(cur, start);
          cur = build(e.items[0], start, depth + 1);
        }
        if (e.max == kUnbounded) {
          const int32_t loop = new_state();
          add_eps(cur, loop);
          add_eps(build(e.items[0], loop, depth + 1), loop);
          return loop;
        }
        const int32_t end = new_state();
        add_eps(cur, end);
        for (int32_t i = e.min; i < e.max; ++i) {
          const int32_t start = new_state();
          add_eps(cur, start);
          cur = build(e.items[0], start, depth + 1);
          add_eps(cur, end);
        }
        return end;
      }
      case ExprKind::Ref: {
        if (rules_.inlined(e.rule)) return build(ir_.rules()[size_t(e.rule)].body, from, depth + 1);
        const int32_t to = new_state();
        calls_[size_t(from)].push_back({e.rule, to});
        return to;
      }
    }
    return from;
  }

  void add_sequences(int32_t from, const std::vector<ByteSequence>& seqs, int32_t end) {
    for (const ByteSequence& seq : seqs) {
      int32_t cur = from;
      for (size_t i = 0; i < seq.size(); ++i) {
        const int32_t next = i + 1 == seq.size() ? end : new_state();
        add_byte(cur, seq[i].lo, seq[i].hi, next);
        cur = next;
      }
    }
  }

  void add_literal(int32_t from, std::string_view text, int32_t end) {
    int32_t cur = from;
    for (size_t i = 0; i < text.size(); ++i) {
      const int32_t next = i + 1 == text.size() ? end : new_state();
      add_byte(cur, uint8_t(text[i]), uint8_t(text[i]), next);
      cur = next;
    }
  }

  // A character as JSON writes it inside a string: plain UTF-8, except '"', '\' and the controls, which
  // only exist escaped (\", \\, \b \f \n \r \t, other controls \u00XX in either hex case).
  void add_json_chars(int32_t from, const CodePointSet& set, int32_t end) {
    CodePointSet special = CodePointSet::range(0, 0x1F);
    special.add('"');
    special.add('\\');
    add_sequences(from, utf8_sequences(set.minus(special)), end);
    static constexpr std::pair<uint32_t, const char*> kShort[] = {
        {'"', "\\\""}, {'\\', "\\\\"}, {0x08, "\\b"}, {0x0C, "\\f"}, {0x0A, "\\n"}, {0x0D, "\\r"}, {0x09, "\\t"}};
    static constexpr char kHex[] = "0123456789abcdef";
    for (const CodePointRange& r : set.ranges()) {
      for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x5C); ++c) {
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        const char* short_form = nullptr;
        for (const auto& [code, text] : kShort)
          if (code == c) short_form = text;
        if (short_form) {
          add_literal(from, short_form, end);
          continue;
        }
        // \u00XX with the last hex digit in either case.
        const int32_t prefix = new_state();
        add_literal(from, "\\u00", prefix);
        const int32_t mid = new_state();
        add_byte(prefix, uint8_t(kHex[c >> 4]), uint8_t(kHex[c >> 4]), mid);
        const char low = kHex[c & 15];
        add_byte(mid, uint8_t(low), uint8_t(low), end);
        if (low >= 'a') add_byte(mid, uint8_t(low - 32), uint8_t(low - 32), end);
      }
    }
  }

  void compute_byte_classes() {
    std::array<bool, 257> boundary{};
    boundary[0] = true;
    for (const auto& edges : bytes_)
      for (const NfaEdge& e : edges) {
        boundary[e.lo] = true;
        boundary[size_t(e.hi) + 1] = true;
      }
    int32_t cls = -1;
    for (size_t b = 0; b < 256; ++b) {
      if (boundary[b]) ++cls;
      g_.byte_class_[b] = uint8_t(cls);
    }
    g_.n_classes_ = cls + 1;
  }

  // ---- DFA ----
  void spend(size_t steps) {
    work_ += steps;
    if (work_ > limits_.max_work)
      grammar_fail("the grammar is too complex to compile: its alternatives overlap too much (more than {} "
                   "determinization steps)",
                   limits_.max_work);
  }

  // The epsilon closure of `seeds` (consumed), sorted, into closure_ (reused: this runs once per DFA transition,
  // and allocating per call was a third of the compile time).
  const std::vector<int32_t>& closure(std::vector<int32_t>& seeds) {
    std::vector<int32_t>& out = closure_;
    out.clear();
    visit_mark_.resize(bytes_.size(), 0);
    ++visit_epoch_;
    size_t steps = seeds.size();
    while (!seeds.empty()) {
      const int32_t s = seeds.back();
      seeds.pop_back();
      if (visit_mark_[size_t(s)] == visit_epoch_) continue;
      visit_mark_[size_t(s)] = visit_epoch_;
      out.push_back(s);
      steps += eps_[size_t(s)].size();
      for (int32_t t : eps_[size_t(s)]) seeds.push_back(t);
    }
    spend(steps + out.size());  // the visits, and the sort and hash of the set
    std::sort(out.begin(), out.end());
    return out;
  }

  // The DFA state of NFA state set `set`: copied into the table only when new.
  int32_t dfa_state(const std::vector<int32_t>& set) {
    auto it = ids_.find(set);
    if (it != ids_.end()) return it->second;
    if (sets_.size() >= limits_.max_dfa_states)
      grammar_fail("the grammar is too complex: more than {} automaton states (a pattern with many bounded "
                   "repetitions or overlapping alternatives)",
                   limits_.max_dfa_states);
    const auto id = int32_t(sets_.size());
    ids_.emplace(set, id);
    sets_.push_back(set);
    state_end_.push_back(current_end_);
    return id;
  }

  void expand(int32_t d) {
    const int32_t nc = g_.n_classes_;
    buckets_.resize(size_t(nc));  // empty between calls; their capacity is kept
    std::vector<NfaCall> calls;
    bool final = false;
    spend(sets_[size_t(d)].size() + size_t(nc));
    for (int32_t s : sets_[size_t(d)]) {
      if (s == state_end_[size_t(d)]) final = true;
      spend(bytes_[size_t(s)].size());
      for (const NfaEdge& e : bytes_[size_t(s)])
        for (int32_t c = g_.byte_class_[e.lo]; c <= g_.byte_class_[e.hi]; ++c) buckets_[size_t(c)].push_back(e.to);
      calls.insert(calls.end(), calls_[size_t(s)].begin(), calls_[size_t(s)].end());
    }
    std::vector<int32_t> row(size_t(nc), -1);
    for (int32_t c = 0; c < nc; ++c)
      if (!buckets_[size_t(c)].empty()) row[size_t(c)] = dfa_state(closure(buckets_[size_t(c)]));
    std::sort(calls.begin(), calls.end(), [](const NfaCall& a, const NfaCall& b) { return a.rule < b.rule; });
    std::vector<Call> out_calls;
    std::vector<int32_t> targets;
    for (size_t i = 0; i < calls.size();) {
      size_t j = i;
      targets.clear();
      while (j < calls.size() && calls[j].rule == calls[i].rule) targets.push_back(calls[j++].to);
      out_calls.push_back({calls[i].rule, dfa_state(closure(targets))});
      i = j;
    }
    if (rows_.size() <= size_t(d)) {
      rows_.resize(size_t(d) + 1);
      dfa_calls_.resize(size_t(d) + 1);
      dfa_final_.resize(size_t(d) + 1);
    }
    rows_[size_t(d)] = std::move(row);
    dfa_calls_[size_t(d)] = std::move(out_calls);
    dfa_final_[size_t(d)] = final;
  }

  void finish_tables() {
    const size_t n = sets_.size(), nc = size_t(g_.n_classes_);
    g_.next_.assign(n * nc, -1);
    g_.flags_.assign(n, 0);
    for (size_t d = 0; d < n; ++d) std::copy(rows_[d].begin(), rows_[d].end(), g_.next_.begin() + ptrdiff_t(d * nc));
    // The NFA is no longer needed.
    bytes_ = {};
    eps_ = {};
    calls_ = {};
  }

  // ---- checks and pruning ----
  void check_and_prune() {
    // Left recursion first (on every call, pruned or not: it is the clearer message for `a ::= a "x"`).
    lay_out(nullptr);
    check_left_recursion();
    const size_t n = sets_.size(), nc = size_t(g_.n_classes_);
    const size_t n_rules = g_.rule_starts_.size();
    auto start_of = [&](int32_t rule) { return g_.rule_starts_[size_t(rule)]; };

    // Productive states: the rule can still end from here (calls into productive rules count).
    std::vector<bool> prod(n, false);
    std::vector<std::vector<int32_t>> byte_preds(n), ret_callers(n), rule_callers(n_rules);
    for (size_t d = 0; d < n; ++d) {
      for (size_t c = 0; c < nc; ++c) {
        const int32_t t = rows_[d][c];
        if (t >= 0 && (byte_preds[size_t(t)].empty() || byte_preds[size_t(t)].back() != int32_t(d)))
          byte_preds[size_t(t)].push_back(int32_t(d));
      }
      for (const Call& call : dfa_calls_[d]) {
        ret_callers[size_t(call.ret)].push_back(int32_t(d));
        rule_callers[size_t(call.rule)].push_back(int32_t(d));
      }
    }
    std::vector<int32_t> work;
    auto mark = [&](int32_t d) {
      if (!prod[size_t(d)]) {
        prod[size_t(d)] = true;
        work.push_back(d);
      }
    };
    auto call_ok = [&](const Call& call) {
      return start_of(call.rule) >= 0 && prod[size_t(start_of(call.rule))] && prod[size_t(call.ret)];
    };
    std::vector<std::vector<int32_t>> rules_starting_at(n);
    for (size_t r = 0; r < n_rules; ++r)
      if (start_of(int32_t(r)) >= 0) rules_starting_at[size_t(start_of(int32_t(r)))].push_back(int32_t(r));
    for (size_t d = 0; d < n; ++d)
      if (dfa_final_[d]) mark(int32_t(d));
    while (!work.empty()) {
      const int32_t t = work.back();
      work.pop_back();
      for (int32_t d : byte_preds[size_t(t)]) mark(d);
      for (int32_t d : ret_callers[size_t(t)])
        for (const Call& call : dfa_calls_[size_t(d)])
          if (call.ret == t && call_ok(call)) mark(d);
      for (int32_t r : rules_starting_at[size_t(t)])
        for (int32_t d : rule_callers[size_t(r)])
          for (const Call& call : dfa_calls_[size_t(d)])
            if (call.rule == r && call_ok(call)) mark(d);
    }
    const int32_t root_start = start_of(g_.root_);
    if (root_start < 0 || !prod[size_t(root_start)])
      grammar_fail("the grammar can never be completed: rule '{}' matches no string", g_.rule_names_[size_t(g_.root_)]);
    lay_out(&prod);
  }

  // Flags and the flat call list; with `productive`, transitions and calls that cannot complete are dropped.
  void lay_out(const std::vector<bool>* productive) {
    const size_t n = sets_.size(), nc = size_t(g_.n_classes_);
    auto ok = [&](int32_t state) { return !productive || (*productive)[size_t(state)]; };
    g_.calls_.clear();
    g_.call_begin_.assign(n + 1, 0);
    for (size_t d = 0; d < n; ++d) {
      uint8_t flags = dfa_final_[d] ? CompiledGrammar::kFinal : 0;
      for (size_t c = 0; c < nc; ++c) {
        int32_t& t = g_.next_[d * nc + c];
        if (t >= 0 && !ok(t)) t = -1;
        if (t >= 0) flags |= CompiledGrammar::kHasBytes;
      }
      g_.call_begin_[d] = uint32_t(g_.calls_.size());
      for (const Call& call : dfa_calls_[d]) {
        const int32_t start = g_.rule_starts_[size_t(call.rule)];
        if (start < 0 || !ok(start) || !ok(call.ret)) continue;
        g_.calls_.push_back(call);
        flags |= CompiledGrammar::kHasCalls;
      }
      g_.flags_[d] = flags;
    }
    g_.call_begin_[n] = uint32_t(g_.calls_.size());
  }

  // A rule that can enter itself before consuming a byte would make call expansion loop forever.
  void check_left_recursion() {
    const size_t n = sets_.size(), n_rules = g_.rule_starts_.size();
    // Nullable rules (they can end without a byte) as a least fixpoint over states, driven by a work list: a state
    // can reach its rule's end without a byte when it is final, or calls a nullable rule whose return state can.
    // (Scanning every rule again until nothing changed was quadratic: 3000 rules that each become nullable only
    // after the next took 0.4 s, and so did one rule calling a nullable rule 30000 times.)
    std::vector<bool> nullable(n_rules, false), null_end(n, false);
    std::vector<std::vector<const Call*>> by_ret(n), by_rule(n_rules);
    std::vector<std::vector<int32_t>> rules_starting_at(n);
    std::vector<int32_t> caller(g_.calls_.size());  // the state each call is made from
    for (size_t d = 0; d < n; ++d) {
      for (const Call& call : g_.calls(int32_t(d))) {
        caller[size_t(&call - g_.calls_.data())] = int32_t(d);
        by_ret[size_t(call.ret)].push_back(&call);
        by_rule[size_t(call.rule)].push_back(&call);
      }
    }
    for (size_t r = 0; r < n_rules; ++r)
      if (g_.rule_starts_[r] >= 0) rules_starting_at[size_t(g_.rule_starts_[r])].push_back(int32_t(r));
    std::vector<int32_t> work;
    auto mark = [&](int32_t d) {
      if (!null_end[size_t(d)]) {
        null_end[size_t(d)] = true;
        work.push_back(d);
      }
    };
    auto from = [&](const Call* call) { return caller[size_t(call - g_.calls_.data())]; };
    for (size_t d = 0; d < n; ++d)
      if (g_.is_final(int32_t(d))) mark(int32_t(d));
    while (!work.empty()) {
      const int32_t t = work.back();
      work.pop_back();
      for (const Call* call : by_ret[size_t(t)])
        if (nullable[size_t(call->rule)]) mark(from(call));
      for (int32_t r : rules_starting_at[size_t(t)]) {
        if (nullable[size_t(r)]) continue;
        nullable[size_t(r)] = true;
        for (const Call* call : by_rule[size_t(r)])
          if (null_end[size_t(call->ret)]) mark(from(call));
      }
    }
    // The rules each rule may call before its first byte: calls made from the states its start reaches through
    // calls of nullable rules (states of its own automaton: each state is visited once in all).
    std::vector<std::vector<int32_t>> first_calls(n_rules);
    std::vector<size_t> seen_by(n, SIZE_MAX);  // the rule whose walk visited the state
    std::vector<int32_t> todo;
    for (size_t r = 0; r < n_rules; ++r) {
      if (g_.rule_starts_[r] < 0) continue;
      todo.assign(1, g_.rule_starts_[r]);
      while (!todo.empty()) {
        const int32_t d = todo.back();
        todo.pop_back();
        if (seen_by[size_t(d)] == r) continue;
        seen_by[size_t(d)] = r;
        for (const Call& call : g_.calls(d)) {
          first_calls[r].push_back(call.rule);
          if (nullable[size_t(call.rule)]) todo.push_back(call.ret);
        }
      }
    }
    std::vector<uint8_t> color(n_rules, 0);  // 0 new, 1 on the path, 2 done
    for (size_t r = 0; r < n_rules; ++r) {
      if (color[r] || g_.rule_starts_[r] < 0) continue;
      std::vector<std::pair<int32_t, size_t>> path{{int32_t(r), 0}};
      color[r] = 1;
      while (!path.empty()) {
        auto& [rule, next] = path.back();
        if (next < first_calls[size_t(rule)].size()) {
          const int32_t s = first_calls[size_t(rule)][next++];
          if (color[size_t(s)] == 1)
            grammar_fail("rule '{}' is left-recursive: it can reach itself without matching any text first",
                         g_.rule_names_[size_t(s)]);
          if (color[size_t(s)] == 0) {
            color[size_t(s)] = 1;
            path.push_back({s, 0});
          }
        } else {
          color[size_t(rule)] = 2;
          path.pop_back();
        }
      }
    }
  }

  const GrammarIR& ir_;
  const CompileLimits& limits_;
  RuleAnalysis rules_;
  CompiledGrammar g_;
  // NFA
  std::vector<std::vector<NfaEdge>> bytes_;
  std::vector<std::vector<int32_t>> eps_;
  std::vector<std::vector<NfaCall>> calls_;
  std::vector<uint32_t> visit_mark_;
  uint32_t visit_epoch_ = 0;
  size_t work_ = 0;  // determinization steps so far (CompileLimits::max_work)
  std::vector<int32_t> closure_;                // closure()'s result
  std::vector<std::vector<int32_t>> buckets_;   // expand(): NFA targets per byte class
  // DFA construction
  int32_t current_end_ = -1;  // the NFA end state of the rule being determinized
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> ids_;
  std::vector<std::vector<int32_t>> sets_;
  std::vector<int32_t> state_end_;
  size_t next_unbuilt_ = 0;
  std::vector<std::vector<int32_t>> rows_;
  std::vector<std::vector<Call>> dfa_calls_;
  std::vector<bool> dfa_final_;
};

CompiledGrammar compile(const GrammarIR& ir, const CompileLimits& limits) { return Compiler(ir, limits).run(); }

}  // namespace tessera::grammar
