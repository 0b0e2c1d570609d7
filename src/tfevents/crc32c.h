#pragma once
// CRC-32C (Castagnoli), the checksum of TFRecord framing (and of leveldb's logs): with the
// SSE 4.2 instruction where the CPU has it, a table otherwise.
#include <cstddef>
#include <cstdint>

namespace drover::tfevents {

uint32_t Crc32c(const void* data, size_t n);

// TFRecord stores each CRC masked: rotated right by 15 bits plus a constant, so a CRC of data
// that itself holds CRCs is not trivially zero.
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace drover::tfevents
