// Exceptions of the native core.  The binding maps each to the Python
// exception of the same name in cepam.errors.
#pragma once

#include <stdexcept>
#include <string>

namespace cepam {

// An argument has a value the core cannot accept.
struct InvalidArgument : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A payload body is malformed (hostile or corrupted input).
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A payload decodes to values its output type cannot hold (a FormatError:
// servers that drop malformed payloads drop these too).
struct DecodingError : FormatError {
  using FormatError::FormatError;
};

// The input cannot be encoded with these settings.
struct EncodingError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A CUDA device or its runtime failed (no driver, out of device memory, a
// failed launch): not the caller's input.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace cepam
