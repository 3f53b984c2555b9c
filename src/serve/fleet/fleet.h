// serve's fleet room: the work the replicas share. Verdicts by digest (memory, the shared store,
// single flight, scan workers), the work queue, shared facts, the crawl, pacing, and the Redis
// they are kept in (each piece behind its interface, Redis its implementation). The other rooms
// and the composition include this header only.
#pragma once

#include "serve/fleet/crawl.h"         // IWYU pragma: export
#include "serve/fleet/facts_store.h"   // IWYU pragma: export
#include "serve/fleet/redis_client.h"  // IWYU pragma: export
#include "serve/fleet/redis_store.h"   // IWYU pragma: export
#include "serve/fleet/resolver.h"      // IWYU pragma: export
#include "serve/fleet/verdicts.h"      // IWYU pragma: export
#include "serve/fleet/work_queue.h"    // IWYU pragma: export
