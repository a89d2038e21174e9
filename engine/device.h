// Where a tensor lives: the CPU, or CUDA device N ("cuda:0").
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT
  // "cpu", "cuda", "cuda:1". Throws kiln::Error on anything else.
  explicit Device(const std::string& spec);

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;
  bool operator==(const Device& o) const { return type == o.type && (type == DeviceType::cpu || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline const char* device_type_name(DeviceType t) { return t == DeviceType::cpu ? "cpu" : "cuda"; }
inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace kiln
