// The matmul kernel types: a weight type in one memory layout. Only the enum, so that the per-ISA kernel files can
// include it: an inline function here could be compiled with wider instructions there and picked by the linker for
// baseline callers. Which weight type and layout each one stands for is in the weight-type registry
// (core/weight_types.h), which checks that every value appears there once.
#pragma once

namespace tessera {

// Q4_0x8, Q8_0x8, I8x8, Q4_Kx8, Q6_Kx8: rows interleaved in groups of 8 (kernels/interleave.h); a call's row
// range starts and ends at a group boundary. F32x32, F16x32, BF16x32, FP8x32 (E4M3 with row scales): rows in
// panels of kPanelRows (WeightLayout::Panel32); a call's row range starts and ends at a panel boundary.
enum class KernelType : int {
  F32, F16, BF16, I8, Q8_0, Q4_0, Q4_K, Q6_K, Q4_0x8, Q8_0x8, I8x8, Q4_Kx8, Q6_Kx8, F32x32, F16x32, BF16x32, FP8x32
};
constexpr int kKernelTypeCount = static_cast<int>(KernelType::FP8x32) + 1;

}  // namespace tessera
