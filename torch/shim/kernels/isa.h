// The instruction sets the CPU loops are compiled for. Every *_cpu.cpp file
// is compiled for AVX2 and FMA; those whose loops give each value the same
// arithmetic at any vector width (lane-wise loops: no sum runs across the
// lanes of a vector) are compiled a second time for AVX-512, with MG_ISA
// naming it (Makefile), and run where the CPU has it (mg_avx512): the
// results are the same bits, the loops twice as wide. A loop template takes
// the set as its second parameter so that the two builds' instantiations are
// different functions; it defaults to AVX2 for callers that do not choose.
#pragma once

namespace mg {

enum class Isa { avx2, avx512 };

} // namespace mg

#ifndef MG_ISA
#define MG_ISA mg::Isa::avx2
#endif
