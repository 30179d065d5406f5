//===- ParamPatterns.cpp - Recipe patterns over parameter names -----------===//

#include "passes/ParamPatterns.h"

using namespace mlir;
using namespace dpc;

std::optional<ParamPattern> ParamPattern::create(StringRef text) {
  llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(text);
  if (!glob) {
    llvm::consumeError(glob.takeError());
    return std::nullopt;
  }
  return ParamPattern(std::move(*glob));
}

bool ParamPattern::matchesModule(StringRef module) const {
  for (StringRef rest = module;;) {
    if (glob.match(rest))
      return true;
    size_t dot = rest.find('.');
    if (dot == StringRef::npos)
      return false;
    rest = rest.drop_front(dot + 1);
  }
}

std::string dpc::moduleName(dp::ParamOp weight) {
  if (auto hfName = weight->getAttrOfType<StringAttr>("hf.name")) {
    StringRef name = hfName.getValue();
    name.consume_back(".weight");
    return name.str();
  }
  return weight.getSymName().str();
}

bool dpc::isLoRAAdapter(dp::ParamOp param) {
  return param->hasAttr(kLoRABaseAttr) &&
         (param.getSymName().ends_with(".lora_A") ||
          param.getSymName().ends_with(".lora_B"));
}
