/* A fake cuDNN sub-library (libcudnn_ops.so.9, ...): it exports its version check, which, like the
 * real one, compares its own version with the libcudnn that loaded it.
 *   FAKE_CHECK_SYMBOL  the check it exports (cudnnOpsVersionCheck, cudnnOpsInferVersionCheck, ...)
 *   FAKE_SUB_VERSION   its own version (cudnnGetVersion encoding)
 *   FAKE_MISMATCH_STATUS  what it returns on a mismatch (1002 for cuDNN 9, 14 for cuDNN 8) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#ifndef FAKE_MISMATCH_STATUS
#define FAKE_MISMATCH_STATUS 1002
#endif

int FAKE_CHECK_SYMBOL(void) {
  size_t (*shim)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "fake_cudnn_shim_version");
  return shim && shim() == FAKE_SUB_VERSION ? 0 : FAKE_MISMATCH_STATUS;
}
