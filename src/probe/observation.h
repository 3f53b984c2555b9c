// imgcheck-probe's JSON document, for the host side that parses and reports it.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace imgcheck::probe {

/// The probe's stdout parsed, with every string's bytes restored: the probe writes each byte
/// outside printable ASCII as \u00XX (child/json_out.cpp), so a path that is not UTF-8 comes back
/// byte for byte. Discarded (is_discarded()) when the text is not JSON.
nlohmann::json ParseProbeDocument(std::string_view text);

}  // namespace imgcheck::probe
