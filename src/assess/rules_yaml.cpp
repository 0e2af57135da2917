// The rules file loader: strict (unknown keys and bad values are errors, each naming its key
// and line), into the compiled form that the cache stores (rules_cache.cpp).
#include <set>

#include "assess/assess_rules.hpp"
#include "common/yaml_strict.hpp"
#include "internal.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::assess {

namespace {

// A string or a list of strings: at least one, none empty.
std::vector<std::string> string_list(const StrictYaml& y, const YAML::Node& n, const std::string& key) {
  const std::string expected = "a non-empty string or a list of non-empty strings";
  std::vector<std::string> out;
  if (n.IsScalar()) out.push_back(n.Scalar());
  else if (n.IsSequence()) out = y.strings(n, key);
  else y.fail(n, key, expected);
  if (out.empty()) y.fail(n, key, expected, "an empty list");
  for (const auto& s : out)
    if (s.empty()) y.fail(n, key, expected, "an empty string");
  return out;
}

Pattern pattern(const StrictYaml& y, const YAML::Node& n, const std::string& key) {
  Pattern p;
  p.text = y.scalar(n, key, "a regular expression");
  try {
    p = Pattern::compile(p.text);
  } catch (const std::regex_error& e) {
    y.fail(n, key, "an ECMAScript regular expression",
           "'" + p.text + "', a bad regular expression (" + e.what() + ")");
  }
  return p;
}

Severity severity(const StrictYaml& y, const YAML::Node& n, const std::string& key) {
  const std::string s = y.scalar(n, key);
  for (auto v : {Severity::info, Severity::low, Severity::medium, Severity::high, Severity::critical})
    if (s == to_string(v)) return v;
  y.fail(n, key, "info, low, medium, high or critical");
}

// `flows: [host, secret]`: the kinds of host data (Flow bits) a value carries or a path names.
uint8_t flows(const StrictYaml& y, const YAML::Node& n, const std::string& key) {
  uint8_t out = 0;
  for (const std::string& f : string_list(y, n, key)) {
    const uint8_t bit = flow_named(f);
    if (!bit) y.fail(n, key, "host, secret, environ, own, system or network", f);
    out |= bit;
  }
  return out;
}

ArgSpec arg_condition(const StrictYaml& y, const YAML::Node& n, const std::string& key) {
  y.check_keys(n, key, {"index", "keyword", "any", "contains", "regex", "equals", "not_in", "dynamic", "decoded", "folded", "present", "flows",
                        "except_flows"});
  ArgSpec a;
  if (n["index"]) a.index = static_cast<int>(y.integer(n["index"], key + ".index", 0, 31));
  if (n["keyword"]) a.keyword = y.scalar(n["keyword"], key + ".keyword");
  if (n["any"]) a.any = y.boolean(n["any"], key + ".any");
  if (a.index < 0 && a.keyword.empty() && !a.any)
    y.fail(n, key, "index, keyword or any: true", "no argument selected");
  if (n["contains"]) a.contains = string_list(y, n["contains"], key + ".contains");
  if (n["regex"]) a.regex = pattern(y, n["regex"], key + ".regex");
  if (n["equals"]) a.equals = string_list(y, n["equals"], key + ".equals");
  if (n["not_in"]) a.not_in = string_list(y, n["not_in"], key + ".not_in");
  if (n["dynamic"]) a.dynamic = y.boolean(n["dynamic"], key + ".dynamic");
  if (n["decoded"]) a.decoded = y.boolean(n["decoded"], key + ".decoded");
  if (n["folded"]) a.folded = y.boolean(n["folded"], key + ".folded");
  if (n["present"]) a.present = y.boolean(n["present"], key + ".present");
  if (n["flows"]) a.flows = flows(y, n["flows"], key + ".flows");
  if (n["except_flows"]) a.except_flows = flows(y, n["except_flows"], key + ".except_flows");
  return a;
}

void parse_match(const StrictYaml& y, const YAML::Node& m, RuleSpec& r, const std::string& key) {
  y.check_keys(m, key, {"call", "reference", "import", "string", "detector", "all_of", "args", "unbounded_loop", "unless_waiting",
                          "not_called"});
  int kinds = 0;
  for (const char* k : {"call", "reference", "import", "string", "detector", "all_of"}) kinds += m[k] ? 1 : 0;
  if (kinds != 1)
    y.fail(m, key, "exactly one of call, reference, import, string, detector, all_of", std::to_string(kinds) + " of them");
  if ((m["args"] || m["unbounded_loop"]) && !m["call"])
    y.fail(m, key, "a call match (args and unbounded_loop apply to call only)", "args or unbounded_loop without call");
  if (m["not_called"] && !m["reference"])
    y.fail(m, key, "a reference match (not_called applies to reference only)", "not_called without reference");
  if (m["call"]) {
    r.type = Rule::Type::call;
    r.names = string_list(y, m["call"], key + ".call");
    if (const auto args = m["args"]) {
      if (!args.IsSequence()) y.fail(args, key + ".args", "a list of argument conditions");
      for (size_t i = 0; i < args.size(); ++i)
        r.args.push_back(arg_condition(y, args[i], key + ".args[" + std::to_string(i) + "]"));
    }
    if (m["unbounded_loop"]) r.unbounded_loop = y.boolean(m["unbounded_loop"], key + ".unbounded_loop");
    if (m["unless_waiting"]) r.unless_waiting = y.boolean(m["unless_waiting"], key + ".unless_waiting");
    if (r.unless_waiting && !r.unbounded_loop)
      y.fail(m["unless_waiting"], key + ".unless_waiting", "unbounded_loop: true beside it", "unless_waiting alone");
  } else if (m["reference"]) {
    r.type = Rule::Type::reference;
    r.names = string_list(y, m["reference"], key + ".reference");
    if (m["not_called"]) r.not_called = y.boolean(m["not_called"], key + ".not_called");
  } else if (m["import"]) {
    r.type = Rule::Type::import;
    r.names = string_list(y, m["import"], key + ".import");
  } else if (const auto s = m["string"]) {
    r.type = Rule::Type::string;
    const std::string skey = key + ".string";
    y.check_keys(s, skey, {"contains", "regex", "acts_on", "flows"});
    if (s["contains"]) r.contains = string_list(y, s["contains"], skey + ".contains");
    if (s["regex"]) r.regex = pattern(y, s["regex"], skey + ".regex");
    if (s["acts_on"]) r.acts_on = string_list(y, s["acts_on"], skey + ".acts_on");
    if (s["flows"]) r.flows = flows(y, s["flows"], skey + ".flows");
    if (r.contains.empty() && !r.regex) y.fail(s, skey, "contains and/or regex", "neither");
  } else if (const auto d = m["detector"]) {
    r.type = Rule::Type::detector;
    const std::string name = y.scalar(d, key + ".detector");
    std::string known;
    for (size_t i = 0; i < static_cast<size_t>(Detector::count_); ++i) {
      known += (known.empty() ? "" : ", ") + std::string(to_string(static_cast<Detector>(i)));
      if (name == to_string(static_cast<Detector>(i))) r.detector = static_cast<Detector>(i);
    }
    if (r.detector == Detector::count_)
      y.fail(d, key + ".detector", "one of: " + known, "an unknown detector '" + name + "'");
  } else {
    r.type = Rule::Type::combo;
    for (const auto& group : string_list(y, m["all_of"], key + ".all_of")) {
      std::vector<std::string> alts;
      size_t b = 0;
      for (size_t e; (e = group.find('|', b)) != std::string::npos; b = e + 1) alts.push_back(group.substr(b, e - b));
      alts.push_back(group.substr(b));
      r.all_of.push_back(std::move(alts));
    }
  }
}

}  // namespace

std::string RuleSet::read(const std::filesystem::path& file, int fd) {
  try {
    return fd >= 0 ? read_fd(fd, SIZE_MAX, file.string()) : read_file(file.string());
  } catch (const Error& e) {
    throw Error(file.string() + ": cannot read the assessor rules file", "check the rules: key in security.yaml",
                e.sys_errno());
  }
}

RuleSet RuleSet::load(const std::filesystem::path& file) { return parse(file, read(file)); }

RuleSet RuleSet::parse(const std::filesystem::path& file, const std::string& text) {
  const StrictYaml y(file);
  const YAML::Node root = y.parse(text);
  std::vector<RuleSpec> specs;
  std::vector<std::string> actuators;
  try {
    y.check_keys(root, "", {"version", "actuators", "rules"});
    if (root["actuators"]) actuators = string_list(y, root["actuators"], "actuators");
    y.integer(y.require(root, "", "version", "1 (the rules format version)"), "version", 1, 1);
    const YAML::Node list = y.require(root, "", "rules", "a list of rules");
    if (!list.IsSequence()) y.fail(list, "rules", "a list of rules");
    std::set<std::string> ids;
    std::vector<YAML::Node> all_of_nodes;  // per rule, for the tag check below
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node n = list[i];
      std::string key = "rules[" + std::to_string(i) + "]";
      if (!n.IsMap()) y.fail(n, key, "a rule mapping");
      RuleSpec r;
      const YAML::Node id = y.require(n, key, "id", "a unique rule id");
      r.id = y.scalar(id, key + ".id", "a unique rule id");
      if (r.id.empty()) y.fail(id, key + ".id", "a unique rule id");
      key = "rule '" + r.id + "'";
      y.check_keys(n, key, {"id", "severity", "score", "message", "tags", "report", "match"});
      if (!ids.insert(r.id).second) y.fail(id, key + ".id", "a unique rule id", "a duplicate id");
      r.severity = severity(y, y.require(n, key, "severity", "info, low, medium, high or critical"), key + ".severity");
      r.score = static_cast<int>(y.integer(y.require(n, key, "score", "a score from 0 to 1000"), key + ".score", 0, 1000));
      r.message = y.scalar(y.require(n, key, "message", "a message"), key + ".message");
      if (n["tags"]) r.tags = string_list(y, n["tags"], key + ".tags");
      if (n["report"]) r.report = y.boolean(n["report"], key + ".report");
      const YAML::Node match = y.require(n, key, "match", "a match mapping");
      parse_match(y, match, r, key + ".match");
      all_of_nodes.push_back(match["all_of"]);
      specs.push_back(std::move(r));
    }
    // Combination rules may only name tags that some rule sets (catches typos).
    std::set<std::string, std::less<>> tags;
    for (const auto& r : specs) tags.insert(r.tags.begin(), r.tags.end());
    for (const auto& t : actuators)
      if (!tags.count(t)) y.fail(root["actuators"], "actuators", "tags that some rule sets", "an unknown tag '" + t + "'");
    for (size_t k = 0; k < specs.size(); ++k)
      for (const auto& t : specs[k].acts_on)
        if (!tags.count(t))
          y.fail(list[k]["match"]["string"]["acts_on"], "rule '" + specs[k].id + "'.match.string.acts_on",
                 "tags that some rule sets in its tags", "an unknown tag '" + t + "'");
    for (size_t k = 0; k < specs.size(); ++k)
      for (const auto& g : specs[k].all_of)
        for (const auto& t : g)
          if (!tags.count(t))
            y.fail(all_of_nodes[k], "rule '" + specs[k].id + "'.match.all_of",
                   "tags that some rule sets in its tags", "an unknown tag '" + t + "'");
  } catch (const YAML::Exception& e) {
    throw Error(y.where(e.mark) + ": " + e.msg, "fix the rules file");
  }
  auto bytes = std::make_shared<const std::string>(encode(specs, actuators));
  std::optional<RuleSet> set = deserialize(*bytes, bytes);
  if (!set) throw Error(file.string() + ": the rules did not survive their own encoding", "report this as a bug");
  return std::move(*set);
}

}  // namespace sandboxrun::assess
