#include "gpu_probe/gpu_probe.h"

namespace memplan {

const char kNoCudaBuildMessage[] =
    "memplan was built without CUDA: GPU commands are unavailable (rebuild with the CUDA "
    "Toolkit)";

}  // namespace memplan
