// NvtxRange: a scoped NVTX range, so the phases (forward, adjoint, combine, update) show by name in
// Nsight Systems. NVTX 3 is header-only and costs nothing when no profiler is attached.
#pragma once

#include <nvtx3/nvToolsExt.h>

namespace fwi {

class NvtxRange {
public:
    explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
    ~NvtxRange() { nvtxRangePop(); }
    NvtxRange(const NvtxRange&) = delete;
    NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace fwi
