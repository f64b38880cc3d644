#ifndef TOLLGATE_CLIBCRYPTO_SHIM_H
#define TOLLGATE_CLIBCRYPTO_SHIM_H

#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

#include <openssl/opensslv.h>
#if OPENSSL_VERSION_MAJOR < 3
#error "Tollgate needs OpenSSL 3 or later (libssl-dev)"
#endif

#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

/// Initialises an HMAC context with the given digest name ("SHA256", "SHA1").
/// The OSSL_PARAM list is built here because a Swift array pointer only lives for one call.
static inline int tollgate_hmac_init(EVP_MAC_CTX *ctx, const unsigned char *key, size_t keylen, const char *digest) {
    OSSL_PARAM params[2];
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)digest, 0);
    params[1] = OSSL_PARAM_construct_end();
    /* EVP_MAC_init refuses a NULL key with length 0; an empty key is valid for HMAC. */
    static const unsigned char empty = 0;
    return EVP_MAC_init(ctx, keylen == 0 ? &empty : key, keylen, params);
}

#endif
