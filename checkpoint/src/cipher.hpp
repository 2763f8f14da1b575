#pragma once
/// @file cipher.hpp
/// @brief Encryption at rest for the SQLite saver (private to checkpoint/src): each stored item
/// encrypted on its own with XChaCha20-Poly1305 (IETF construction, libsodium), under a random
/// 24-byte nonce stored with it, its address (the parts `codec::seal` binds) authenticated
/// alongside. Layout: `codec::encrypted_marker`, the nonce, the ciphertext, the 16-byte tag.
/// Built without libsodium (STATEGRAPH_WITH_SODIUM off), `available()` is false and making a
/// cipher throws.

#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace stategraph::checkpoint::codec {

class cipher {
public:
    static constexpr std::size_t key_size = 32;
    using key_type = std::array<unsigned char, key_size>;

    /// @brief Whether this build has libsodium.
    static bool available() noexcept;

    /// @brief Keeps a copy of `key` in guarded memory (libsodium's `sodium_malloc`: locked, wiped on
    /// destruction). Throws std::runtime_error when libsodium is missing or cannot start.
    explicit cipher(const key_type& key);
    ~cipher();
    cipher(const cipher&) = delete;
    cipher& operator=(const cipher&) = delete;

    /// @brief `payload` encrypted under a fresh random nonce, `parts` authenticated with it.
    std::string seal(std::string_view payload, std::initializer_list<std::string_view> parts) const;
    /// @brief The payload of `stored`. Throws `codec::corrupt` when it is not encrypted, is cut
    /// short, or does not authenticate (a changed byte, another address, another key).
    std::string open(std::string_view stored, std::initializer_list<std::string_view> parts) const;

private:
    unsigned char* key_ = nullptr;
};

/// @brief A key from text: 64 hexadecimal digits, whitespace around them ignored; with
/// `raw_allowed`, also exactly 32 bytes taken as they are (the contents of a key file). Throws
/// std::invalid_argument saying what is wrong (never echoing the key).
cipher::key_type parse_key(std::string_view text, bool raw_allowed);

} // namespace stategraph::checkpoint::codec
