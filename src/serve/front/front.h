// serve's HTTP front: HTTPS (TLS, deadlines, bounds) and the documents it answers: Kubernetes
// admission, pinning (mutating admission), Gatekeeper's external data, registry events. The
// composition (server.cpp) includes this header only, as do the other rooms.
#pragma once

#include "serve/front/admission.h"   // IWYU pragma: export
#include "serve/front/events.h"      // IWYU pragma: export
#include "serve/front/gatekeeper.h"  // IWYU pragma: export
#include "serve/front/http.h"        // IWYU pragma: export
#include "serve/front/pinning.h"     // IWYU pragma: export
#include "serve/front/tls.h"         // IWYU pragma: export
