#include "cipher.hpp"

#include "codec.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#if STATEGRAPH_HAVE_SODIUM
#include <sodium.h>
#endif

namespace stategraph::checkpoint::codec {

namespace {

constexpr std::size_t nonce_size = 24; // crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
constexpr std::size_t tag_size = 16;   // crypto_aead_xchacha20poly1305_ietf_ABYTES
static_assert(encrypted_overhead == 1 + nonce_size + tag_size);

/// The associated data: each address part followed by its length (8 bytes, little endian), so
/// that no two addresses give the same bytes (as the checksum of `codec::seal`).
[[maybe_unused]] std::string associated_data(std::initializer_list<std::string_view> parts) {
    std::string out;
    std::size_t n = 0;
    for (auto p : parts) n += p.size() + 8;
    out.reserve(n);
    for (auto p : parts) {
        out.append(p);
        const std::uint64_t len = p.size();
        for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    }
    return out;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

} // namespace

cipher::key_type parse_key(std::string_view text, bool raw_allowed) {
    cipher::key_type key{};
    if (raw_allowed && text.size() == cipher::key_size) {
        for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<unsigned char>(text[i]);
        return key;
    }
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!text.empty() && space(text.front())) text.remove_prefix(1);
    while (!text.empty() && space(text.back())) text.remove_suffix(1);
    if (text.size() != 2 * cipher::key_size)
        throw std::invalid_argument("a key is 64 hexadecimal digits (32 bytes)" +
                                    std::string(raw_allowed ? " or exactly 32 raw bytes" : "") + "; this one has " +
                                    std::to_string(text.size()) + " characters");
    for (std::size_t i = 0; i < key.size(); ++i) {
        const int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            throw std::invalid_argument("a key is 64 hexadecimal digits; character " +
                                        std::to_string(hi < 0 ? 2 * i + 1 : 2 * i + 2) + " is not one");
        key[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    return key;
}

#if STATEGRAPH_HAVE_SODIUM

static_assert(nonce_size == crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
static_assert(tag_size == crypto_aead_xchacha20poly1305_ietf_ABYTES);
static_assert(cipher::key_size == crypto_aead_xchacha20poly1305_ietf_KEYBYTES);

bool cipher::available() noexcept { return true; }

cipher::cipher(const key_type& key) {
    if (sodium_init() < 0) throw std::runtime_error("libsodium could not be initialised");
    key_ = static_cast<unsigned char*>(sodium_malloc(key_size));
    if (!key_) throw std::runtime_error("libsodium could not allocate guarded memory for the key");
    std::copy(key.begin(), key.end(), key_);
    sodium_mprotect_readonly(key_);
}

cipher::~cipher() {
    if (key_) sodium_free(key_); // wipes it
}

std::string cipher::seal(std::string_view payload, std::initializer_list<std::string_view> parts) const {
    const std::string ad = associated_data(parts);
    std::string out(encrypted_overhead + payload.size(), '\0');
    auto* p = reinterpret_cast<unsigned char*>(out.data());
    p[0] = encrypted_marker;
    unsigned char* nonce = p + 1;
    randombytes_buf(nonce, nonce_size);
    unsigned long long written = 0;
    crypto_aead_xchacha20poly1305_ietf_encrypt(p + 1 + nonce_size, &written,
                                               reinterpret_cast<const unsigned char*>(payload.data()), payload.size(),
                                               reinterpret_cast<const unsigned char*>(ad.data()), ad.size(), nullptr,
                                               nonce, key_);
    out.resize(1 + nonce_size + static_cast<std::size_t>(written));
    return out;
}

std::string cipher::open(std::string_view stored, std::initializer_list<std::string_view> parts) const {
    if (!is_encrypted(stored))
        throw corrupt("it is not encrypted, but this file is: a row written without the key, or damaged");
    if (stored.size() < encrypted_overhead)
        throw corrupt("its encryption is cut short (" + std::to_string(stored.size()) + " bytes)");
    const std::string ad = associated_data(parts);
    const auto* p = reinterpret_cast<const unsigned char*>(stored.data());
    std::string out(stored.size() - encrypted_overhead, '\0');
    unsigned long long got = 0;
    if (crypto_aead_xchacha20poly1305_ietf_decrypt(reinterpret_cast<unsigned char*>(out.data()), &got, nullptr,
                                                   p + 1 + nonce_size, stored.size() - 1 - nonce_size,
                                                   reinterpret_cast<const unsigned char*>(ad.data()), ad.size(), p + 1,
                                                   key_) != 0)
        throw corrupt("decryption failed: the stored bytes were changed, moved from another place, or encrypted "
                      "with another key (" + std::to_string(stored.size()) + " bytes)");
    out.resize(static_cast<std::size_t>(got));
    return out;
}

#else

bool cipher::available() noexcept { return false; }

cipher::cipher(const key_type&) {
    throw std::runtime_error("this stategraph was built without libsodium (STATEGRAPH_WITH_SODIUM=OFF): it cannot encrypt");
}

cipher::~cipher() = default;

std::string cipher::seal(std::string_view, std::initializer_list<std::string_view>) const {
    throw std::runtime_error("built without libsodium");
}

std::string cipher::open(std::string_view, std::initializer_list<std::string_view>) const {
    throw corrupt("it is encrypted, and this stategraph was built without libsodium");
}

#endif

} // namespace stategraph::checkpoint::codec
