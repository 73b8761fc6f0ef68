// The outcome of a decoder's read, for code that runs on a CPU and a GPU
// (which cannot throw): a status, and the words the CPU's decoder throws
// for it (read_message, FormatError's).
#pragma once

namespace cepam {

// The outcome of reading a stream (0: fine): the rANS reader's
// (coding/rans_core.hpp), the symbol decoders' (coding/symbol_core.hpp),
// the segment decoders' and the Golomb sections' (coding/golomb_read.hpp).
enum ReadStatus : int {
  kReadOk = 0,
  kReadBadLength,         // shorter than the states, or not whole words
  kReadBadState,          // an initial state out of range
  kReadTruncated,         // a state needs a word and none is left
  kReadTrailing,          // words left after the last symbol, not padding
  kReadNotInitial,        // the states do not end where the encoder began
  kReadPaddingBeyond,     // padding where the bomb rule allows none
  kReadNonCanonicalTrial, // a trial index escaped that has its own symbol
  kReadEscapeRange,       // an escaped coordinate beyond kMaxAbsM
  kReadNonCanonicalEscape,// an escaped coordinate inside its table
  kReadOutsideTable,      // a coarse symbol's offset beyond the table
  kReadBadTrial,          // a trial index out of range (the codec's error)
  kReadNonFinite,         // a decoded value overflows the output type (DecodingError)
  kReadNonCanonicalPoint, // an escaped lattice point that is a candidate of its table
  // A Golomb body's sections (coding/golomb_read.hpp):
  kReadBitsTruncated,     // a read past the section's end
  kReadPrefixTruncated,   // the section ends inside a prefix code's zeros
  kReadPrefixTooLong,     // more zeros than any valid code has
  kReadTrialAboveCap,     // a trial index above kTrialCap
  kReadCoordinateRange,   // a coordinate beyond kMaxAbsM
  kReadHTrailing,         // H section: bits left after the last code
  kReadMTrailing,         // M section: the same
  kReadHPadding,          // H section: a non-zero padding bit
  kReadMPadding,          // M section: the same
  kReadSectionsTooShort,  // a segment's sections cannot hold its coordinates
};

// The CPU decoder's message for a status (FormatError's; kReadBadTrial's
// and kReadNonFinite's name the sub-vector: lrsuq's throw_subvector_error
// and throw_nonfinite_output).
inline const char* read_message(ReadStatus s) {
  switch (s) {
    case kReadBadLength: return "entropy-coded body has a bad length";
    case kReadBadState: return "entropy-coded body has a bad state";
    case kReadTruncated: return "entropy-coded body truncated";
    case kReadTrailing: return "entropy-coded body has trailing data (not valid padding)";
    case kReadNotInitial: return "entropy-coded body does not end in its initial state";
    case kReadPaddingBeyond:
      return "entropy-coded body has trailing data (padding beyond the length the bomb rule "
             "asks)";
    case kReadNonCanonicalTrial: return "non-canonical trial index";
    case kReadEscapeRange: return "escaped lattice coordinate out of range";
    case kReadNonCanonicalEscape: return "non-canonical escaped coordinate";
    case kReadOutsideTable: return "lattice coordinate outside its table";
    case kReadNonCanonicalPoint: return "non-canonical escaped lattice point";
    case kReadBitsTruncated: return "bitstream truncated";
    case kReadPrefixTruncated: return "bitstream truncated inside a prefix code";
    case kReadPrefixTooLong: return "prefix code longer than allowed";
    case kReadTrialAboveCap: return "trial index above the cap";
    case kReadCoordinateRange: return "lattice coordinate out of range";
    case kReadHTrailing: return "H section has trailing bits";
    case kReadMTrailing: return "M section has trailing bits";
    case kReadHPadding: return "H section has non-zero padding";
    case kReadMPadding: return "M section has non-zero padding";
    case kReadSectionsTooShort: return "declared number of coordinates does not fit the body";
    default: return "entropy-coded body is malformed";
  }
}

}  // namespace cepam
