// The DLPack C ABI (v0.8 "legacy" capsules: DLManagedTensor under the
// capsule name "dltensor"), as specified by the DLPack project
// (https://dmlc.github.io/dlpack/latest/c_api.html).  Only the structures,
// with the specification's field types and order: they are the ABI that
// torch, CuPy, JAX and numpy exchange, so cepam needs none of their headers.
#pragma once

#include <cstdint>

namespace cepam::dlpack {

enum DeviceType : std::int32_t { kCPU = 1, kCUDA = 2, kCUDAHost = 3, kCUDAManaged = 13 };
enum TypeCode : std::uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4 };

struct Device {
  std::int32_t device_type;  // DeviceType
  std::int32_t device_id;
};

struct DataType {
  std::uint8_t code;  // TypeCode
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  std::int32_t ndim;
  DataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null: compact row-major
  std::uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

// DLPack's stream convention for CUDA: the legacy default stream is 1.
inline constexpr std::int64_t kLegacyDefaultStream = 1;

}  // namespace cepam::dlpack
