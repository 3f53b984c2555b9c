// scan --dockerfile: findings traced back to the Dockerfile instruction that made them.
#pragma once

#include <string>

#include "image/image.h"
#include "report/report.h"

namespace imgcheck::scan {

/// Points every finding of `rep` (reported or ignored) at the instruction of the Dockerfile at
/// `path` behind it, as `image`'s history maps to its lines; sets rep.dockerfile. util::Fatal
/// when the file cannot be read or parsed.
void MapToDockerfile(const std::string& path, const image::Image& image, report::Report& rep);

}  // namespace imgcheck::scan
