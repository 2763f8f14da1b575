#pragma once
/// @file codec.hpp
/// @brief How the savers lay a checkpoint out in storage (private to checkpoint/src).
///
/// - A checkpoint *record* (everything but its id, parent, step, source and values) is one
///   compact binary string: channel versions as references relative to the checkpoint's own id,
///   frontier and metadata in a small binary JSON form whose common keys are one byte, and the
///   metadata's `step`/`source` left out when they repeat the record's columns.
/// - A channel *value* is its JSON text; a value that extends an earlier version (an `append`
///   channel) is stored as a marker byte, a reference to that version and the JSON array of the
///   appended items. `resolve_value` follows such a chain back to a whole value.
///
/// Both forms start with a format byte, so a later layout can be told apart from this one.
/// The savers store both *sealed* (`seal`): behind a checksum bound to where they are stored.

#include <stategraph/checkpoint/saver.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stategraph::checkpoint::codec {

/// @brief Stored bytes that cannot be read (truncated, unknown format byte, bad JSON).
class corrupt : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// @brief The record of `cp`: versions, frontier, metadata and signature.
std::string encode_record(const checkpoint& cp);

/// @brief Fills `cp.versions`, `cp.frontier`, `cp.metadata` and `cp.signature` from `bytes`;
/// `cp.id`, `cp.step` and `cp.source` must already be set. Throws `corrupt`.
void decode_record(std::string_view bytes, checkpoint& cp);

/// @brief The stored form of a channel value written at `version`; with `extends`, `v` is the
/// JSON array of items appended to the value at version `*extends`.
std::string encode_value(const boost::json::value& v, const std::string* extends, const std::string& version);

/// @brief A graph's shape lines as the JSON array stored for it.
boost::json::value shape_json(const std::vector<std::string>& shape);
/// @brief A graph's shape as every saver stores it (`encode_value` of `shape_json`, versioned by
/// the graph `signature`), before sealing; `shape_from` reads it back.
std::string encode_shape(const std::vector<std::string>& shape, const std::string& signature);
/// @brief Whether a checkpoint's value of `channel` at `version` is a graph shape kept once for
/// every thread (a `__graph__` value versioned by the graph signature, not by checkpoint
/// `checkpoint_id`, and not appended items) rather than with the thread's values.
bool shared_shape(std::string_view channel, const std::string* extends, const std::string& version,
                  const std::string& checkpoint_id) noexcept;
/// @brief The shape lines stored (by `encode_shape`) for graph `signature`.
/// Throws `corrupt`.
std::vector<std::string> shape_from(std::string_view stored, const std::string& signature);

/// @brief A stored value taken apart: the version it extends (if any) and its JSON text.
struct value_parts {
    std::optional<std::string> extends;
    std::string_view json;
};

/// @brief Splits a stored value written at `version`. Throws `corrupt`.
value_parts split_value(std::string_view stored, const std::string& version);

/// @brief The whole value of a channel at `version`: `fetch(version)` returns the stored bytes
/// of that channel at a version (nullopt when missing). Follows `extends` chains and concatenates
/// the items. Throws `corrupt` (bad bytes, a missing link, a chain that is not an array).
boost::json::value resolve_value(const std::string& version,
                                 const std::function<std::optional<std::string>(const std::string&)>& fetch);

/// @brief Several channel values in one string (values stored inside a checkpoint's row): a
/// count, then per value its channel and its stored bytes (as `encode_value` made them).
std::string encode_inline(const std::vector<std::pair<std::string_view, std::string_view>>& values);

/// @brief The (channel, stored bytes) pairs of an `encode_inline` string. Throws `corrupt`.
std::vector<std::pair<std::string_view, std::string_view>> decode_inline(std::string_view bytes);

/// @brief The inline values of a checkpoint stored again: `fresh` (already encoded) replaces,
/// and each value of `old` stays unless `fresh` has its channel or `rewritten(channel)` says it was
/// written elsewhere this time. The `encode_inline` string of the result ("" when none is left).
std::string merge_inline(std::string_view old, const std::vector<std::pair<std::string_view, std::string_view>>& fresh,
                         const std::function<bool(std::string_view)>& rewritten);

/// @brief How many values an `encode_inline` string holds and how many of its bytes are theirs
/// (the rest frames them: channel names, lengths and checksums). Throws `corrupt`.
struct inline_size {
    std::size_t values = 0;
    std::size_t value_bytes = 0;
};
inline_size measure_inline(std::string_view bytes);

/// @brief Adds (channel, version) to `needed`, with every version its appended items extend
/// (`fetch` as for `resolve_value`; a missing link ends the walk, `get()` reports it). What
/// `prune()` must keep for a kept checkpoint. Throws `corrupt`.
void mark_needed(const std::string& channel, const std::string& version,
                 const std::function<std::optional<std::string>(const std::string&)>& fetch,
                 std::set<std::pair<std::string, std::string>>& needed);

/// @brief The CRC-32C (Castagnoli) of `bytes`, the checksum `seal` stores: computed with the
/// processor's `crc32` instruction where it has one (x86-64 with SSE 4.2), else by table.
std::uint32_t crc32c(std::string_view bytes);
/// @brief The table-driven CRC-32C step (the fallback, and the tests' reference): continues the
/// running remainder `crc` over `n` bytes.
std::uint32_t crc32c_by_table(std::uint32_t crc, const unsigned char* p, std::size_t n);
/// @brief `payload` as stored with a checksum: a marker byte, a CRC-32C (4 bytes, little
/// endian) over the address `parts` (say channel and version, or thread, namespace and id) and
/// the payload, then the payload. The checksum binds the bytes to their address, so a changed
/// byte, and bytes moved to another channel, version or checkpoint, are both caught on read.
std::string seal(std::string_view payload, std::initializer_list<std::string_view> parts);
/// @brief The payload of stored bytes: verified when sealed (throws `corrupt` on a mismatch),
/// returned as is when written before checksums (no marker: JSON text, a record's or an
/// appended value's format byte).
std::string_view unseal(std::string_view stored, std::initializer_list<std::string_view> parts);
/// @brief True when `stored` carries a checksum.
bool is_sealed(std::string_view stored) noexcept;
/// @brief The bytes `seal` adds in front of a payload.
inline constexpr std::size_t seal_overhead = 5;

/// @brief First byte of an encrypted item (the SQLite saver's encryption at rest): the marker,
/// a 24-byte nonce, then the ciphertext and its 16-byte tag. Never the first byte of any other
/// stored form (sealed bytes, a record, an appended value, JSON text).
inline constexpr unsigned char encrypted_marker = 0xE5;
/// @brief The bytes encryption adds to a payload (marker, nonce, tag).
inline constexpr std::size_t encrypted_overhead = 1 + 24 + 16;
/// @brief True when `stored` is encrypted (starts with `encrypted_marker`).
inline bool is_encrypted(std::string_view stored) noexcept {
    return !stored.empty() && static_cast<unsigned char>(stored[0]) == encrypted_marker;
}
/// @brief The bytes that frame a stored item's payload: a checksum, an encryption, or none.
std::size_t framing_of(std::string_view stored) noexcept;

/// @brief An id in the 11-character time-ordered form (`new_checkpoint_id`) as a number, or nullopt.
std::optional<std::uint64_t> id_number(std::string_view id);

/// @brief The 11-character form of `n`: fixed width, sortable as text.
std::string id_text(std::uint64_t n);

} // namespace stategraph::checkpoint::codec
