// Import statements: the modules they bind, by the names the file uses for them.
#include <string>

#include "analyzer_impl.hpp"

namespace sandboxrun::assess::detail {

void Analyzer::parse_import() {
  const auto& tk = import_tokens_;
  const uint32_t line = stmt_line_;
  auto dotted = [&](size_t& i) {
    std::string name;
    while (i < tk.size() && (tk[i] == "." || tk[i] == "...")) name += tk[i++];
    while (i < tk.size() && tk[i] != "," && tk[i] != "as" && tk[i] != "import" && tk[i] != "(" && tk[i] != ")") {
      append_capped(name, tk[i++], kMaxQual);
    }
    return name;
  };
  size_t i = 1;
  if (tk[0] == "import") {
    while (i < tk.size()) {
      std::string mod = dotted(i);
      std::string as;
      if (i + 1 < tk.size() && tk[i] == "as") {
        as = tk[i + 1];
        i += 2;
      }
      if (!mod.empty()) {
        sink_.on_import(mod, line);
        modules_.insert(mod);
        modules_.insert(mod.substr(0, mod.find('.')));
        if (!as.empty()) bind(as, ArgInfo{{}, Kind::name, mod, true});
        else bind(mod.substr(0, mod.find('.')), ArgInfo{{}, Kind::name, mod.substr(0, mod.find('.')), true});
      }
      ++i;  // ','
    }
    return;
  }
  std::string mod = dotted(i);
  if (i < tk.size() && tk[i] == "import") ++i;
  if (!mod.empty()) sink_.on_import(mod, line);
  while (i < tk.size()) {
    if (tk[i] == "(" || tk[i] == ")" || tk[i] == ",") {
      ++i;
      continue;
    }
    if (tk[i] == "*") {
      sink_.on_star_import(mod);
      ++i;
      continue;
    }
    std::string name = tk[i++];
    std::string as = name;
    if (i + 1 < tk.size() && tk[i] == "as") {
      as = tk[i + 1];
      i += 2;
    }
    std::string full = mod.empty() || mod.back() == '.' ? mod + name : mod + "." + name;
    sink_.on_import(full, line);
    modules_.insert(full);
    bind(as, ArgInfo{{}, Kind::name, full, true});
  }
}

}  // namespace sandboxrun::assess::detail
