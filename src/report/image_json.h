// The "image" object every JSON document of the report stage opens with (the findings report,
// the catalog): one shape, one function.
#pragma once

#include <nlohmann/json.hpp>

#include "report/report.h"

namespace imgcheck::report {

/// {"reference", "transport", "manifest_digest", "config_digest", "platform"}, in that order.
nlohmann::ordered_json ImageJson(const ImageInfo& image);

}  // namespace imgcheck::report
