// OPA Gatekeeper external data (externaldata.gatekeeper.sh/v1beta1): a ProviderRequest lists
// image references as keys; the ProviderResponse gives each its verdict, so Rego policies can
// decide with it. https://open-policy-agent.github.io/gatekeeper/website/docs/externaldata
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rules/config.h"
#include "serve/front/admission.h"
#include "util/error.h"

namespace imgcheck::serve::front {

/// The keys (image references) of a ProviderRequest.
util::Expected<std::vector<std::string>> ParseProviderRequest(std::string_view body);

/// A ProviderResponse with one item per image: value {"verdict": "pass"|"fail"|"unknown",
/// "digest", "errors": [...], "warnings": [...]}, or the item's error when it cannot be checked;
/// `system_error` set (and no items) when the request itself was bad.
std::string ProviderResponse(const std::vector<ImageResult>& images, rules::FailOn fail_on,
                             const std::string& system_error = "");

}  // namespace imgcheck::serve::front
