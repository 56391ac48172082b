// Module slots: parameter collection, lookup by path and replacement passes.
#include "core/module.h"

namespace braid {

void Module::collect_parameters(std::vector<Parameter*>& out) {
  own_parameters(out);
  for (Slot& s : slots_) s.module->collect_parameters(out);
}

Module* Module::find(std::string_view path) {
  if (path_ == path) return this;
  for (Slot& s : slots_)
    if (Module* m = s.module->find(path)) return m;
  return nullptr;
}

void Module::visit(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (Slot& s : slots_) s.module->visit(fn);
}

int Module::replace(const std::function<bool(const Module&)>& match, const Wrap& wrap) {
  int n = 0;
  for (Slot& s : slots_) {
    if (match(*s.module)) {
      const std::string path = s.module->path();
      s.module = wrap(std::move(s.module));
      BRAID_CHECK(s.module, "a pass replaced {} with nothing", path);
      ++n;
    } else {
      n += s.module->replace(match, wrap);
    }
  }
  return n;
}

std::unique_ptr<Module> Module::take_slot(const std::string& name) {
  for (auto it = slots_.begin(); it != slots_.end(); ++it) {
    if (it->name != name) continue;
    std::unique_ptr<Module> m = std::move(it->module);
    slots_.erase(it);
    return m;
  }
  return nullptr;
}

size_t Module::add_slot(std::string name, std::unique_ptr<Module> m) {
  BRAID_CHECK(m, "slot {} of {} is empty", name, path_);
  slots_.push_back({std::move(name), std::move(m)});
  return slots_.size() - 1;
}

}  // namespace braid
