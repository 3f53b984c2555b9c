// imgcheck why IMAGE SONAME|PATH: how the loader resolves one library for every consumer.
#include <iostream>
#include <memory>

#include "catalog/catalog.h"
#include "cli/commands.h"
#include "loader/why.h"
#include "report/why.h"
#include "rules/scan.h"
#include "util/error.h"
#include "util/path.h"

namespace imgcheck::cli {
namespace {

struct WhyArgs {
  ImageArgs image;
  std::string target;
  std::vector<std::string> consumers;
  std::optional<std::string> ld_library_path;
  std::vector<std::string> rules_dirs;
};

int RunWhy(const WhyArgs& args) {
  rules::Knowledge knowledge = LoadKnowledge(args.rules_dirs);
  image::Image img =
      image::Load(args.image.reference, ToLoadOptions(args.image, knowledge.libraries()));
  catalog::Catalog cat = catalog::Build(img, knowledge.libraries(), args.image.limits);

  util::Expected<loader::Options> loaded = rules::LoaderOptions(img, cat, knowledge.dlopen());
  if (!loaded) throw util::Fatal(loaded.error().message);
  loader::Options options = std::move(*loaded);
  options.limits = args.image.limits;
  if (args.ld_library_path) options.ld_library_path = *args.ld_library_path;

  std::vector<rules::Consumer> consumers;
  if (args.consumers.empty()) {
    consumers = rules::LoadConsumers(img, cat, knowledge, options);
  } else {
    for (const std::string& c : args.consumers) {
      auto resolved = img.tree.Resolve(c);
      if (!resolved || cat.Elf(resolved->path) == nullptr)
        throw util::Fatal("--consumer: " + c + " is not an ELF file in the image");
      rules::Consumer consumer;
      consumer.path = resolved->path;
      consumer.role = "--consumer";
      consumer.graph = loader::Load(
          img.tree, [&](std::string_view p) { return cat.Elf(p); }, resolved->path, options);
      consumers.push_back(std::move(consumer));
    }
  }
  std::vector<loader::Root> roots;
  roots.reserve(consumers.size());
  for (const rules::Consumer& c : consumers) roots.push_back({c.path, c.role, &c.graph});
  std::vector<loader::WhyEntry> entries = loader::FindWhy(img.tree, roots, args.target);
  std::cout << report::RenderWhy(img.tree, args.target, entries) << std::flush;
  bool all_found = !entries.empty();
  for (const loader::WhyEntry& e : entries) all_found &= e.resolution.found();
  return all_found ? 0 : 1;
}

}  // namespace

Runner DefineWhy(CLI::App& sub) {
  auto args = std::make_shared<WhyArgs>();
  AddImageArgs(sub, args->image);
  sub.add_option("target", args->target,
                 "a soname as consumers request it (libcudnn.so.9) or a path in the image")
      ->required();
  sub.add_option("--consumer", args->consumers,
                 "load only this object (a path in the image) instead of every framework "
                 "extension, CUDA library and CUDA executable");
  sub.add_option("--ld-library-path", args->ld_library_path,
                 "use this LD_LIBRARY_PATH instead of the image's Env");
  AddRulesArg(sub, args->rules_dirs);
  sub.footer(
      "Exit status: 0 when every consumer finds it, 1 when one does not (or none requests it), "
      "2 when the image cannot be read.");
  return [args]() -> int { return RunWhy(*args); };
}

}  // namespace imgcheck::cli
