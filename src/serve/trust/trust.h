// serve's trust room: sealed verdicts (what the shared store holds is believed only when sealed
// with --verdict-key-file's key) and attestations (--trust-key: a verdict from a signed
// statement instead of a scan). The other rooms and the composition include this header only.
#pragma once

#include "serve/trust/attested.h"      // IWYU pragma: export
#include "serve/trust/verdict_seal.h"  // IWYU pragma: export
