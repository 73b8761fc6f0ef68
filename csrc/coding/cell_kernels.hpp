// The AVX-512 forms of the coder's lane code (coding/conditional_coder_avx512.cpp),
// for CPUs with AVX-512 F, DQ and VL (simd_avx512dq()); the AVX2 forms are
// in coding/conditional_coder.cpp.  Internal header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/conditional_coder.hpp"

namespace cepam::cell_kernels::avx512 {

// CellCoder::encode_batch's coordinates [0, count - count mod 8), eight at
// a time (coding/cell_lanes.hpp's encode_run); returns how many it coded.
std::size_t encode_run(const CellCoder& cells, const SourceModel& model, const std::int64_t* j,
                       const double* g, const double* o, std::size_t count, AnsEncoder& enc,
                       std::size_t* starts);

// CellCoder::decode_batches of k = 2 or 4 streams b[0..k) from their
// symbols i[0..k): a group of four symbols of each stream at a time, two
// streams' states a register (the same values as the scalar decoder),
// while every stream has a group left whose tables are plain and whose
// slots are not the escape; advances i and the decoders, and returns which
// streams stopped it (bit s for b[s]; never 0).
unsigned decode_streams(const CellCoder& cells, const SourceModel& model,
                        const CellCoder::Batch* b, std::size_t k, std::size_t* i);

// BoxBasis::tables for sub-vectors [0, count - count mod 8) of n = terms.n
// coordinates, eight at a time (coding/cell_lanes.hpp's box_tables; none
// for n other than 4 and 8); returns how many it did.
std::size_t box_tables(const BoxTerms& terms, const std::int64_t* M, const double* V,
                       const double* beta, std::size_t count, std::int64_t* coded, double* g,
                       double* o);

}  // namespace cepam::cell_kernels::avx512
