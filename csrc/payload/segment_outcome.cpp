#include "payload/segment_outcome.hpp"

#include "coding/read_status.hpp"
#include "common/errors.hpp"
#include "lrsuq/quantizer.hpp"
#include "lrsuq/subvector.hpp"

namespace cepam {

void throw_first_error(const SegmentOutcome* outcomes, std::size_t count, const char* dtype) {
  for (std::size_t s = 0; s < count; ++s) {
    const SegmentOutcome& o = outcomes[s];
    if (o.status == kReadOk) continue;
    if (o.status == kReadBadTrial)
      throw_subvector_error(static_cast<std::size_t>(o.at), subvector::kBadTrial, 0.0, o.h);
    if (o.status == kReadNonFinite) throw_nonfinite_output(static_cast<std::size_t>(o.at), dtype);
    throw FormatError(read_message(static_cast<ReadStatus>(o.status)));
  }
}

}  // namespace cepam
