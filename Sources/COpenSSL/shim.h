#ifndef IAPGW_COPENSSL_SHIM_H
#define IAPGW_COPENSSL_SHIM_H
// Swift cannot import function-like and cast macros; each one used is wrapped here.
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/bn.h>
#include <openssl/rand.h>
#include <openssl/ocsp.h>
#include <openssl/core_names.h>
#include <openssl/hmac.h>
#include <string.h>

static inline STACK_OF(X509) *iapgw_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int iapgw_sk_X509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
static inline int iapgw_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *iapgw_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
static inline void iapgw_sk_X509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
static inline void iapgw_sk_X509_pop_free(STACK_OF(X509) *sk) { sk_X509_pop_free(sk, X509_free); }
static inline long iapgw_BIO_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }
static inline EVP_PKEY *iapgw_EVP_EC_gen(const char *curve) { return EVP_EC_gen(curve); }
static inline int iapgw_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }
static inline int iapgw_EVP_PKEY_KEYPAIR(void) { return EVP_PKEY_KEYPAIR; }
static inline STACK_OF(X509) *iapgw_PKCS7_signers_certs(PKCS7 *p7) {
    if (p7 == NULL || !PKCS7_type_is_signed(p7) || p7->d.sign == NULL) return NULL;
    return p7->d.sign->cert;
}
static inline int iapgw_PKCS7_type_is_signed(PKCS7 *p7) { return PKCS7_type_is_signed(p7); }
static inline int iapgw_PKCS7_type_is_data(PKCS7 *p7) { return PKCS7_type_is_data(p7); }
static inline ASN1_OCTET_STRING *iapgw_PKCS7_signed_content(PKCS7 *p7) {
    if (p7 == NULL || !PKCS7_type_is_signed(p7) || p7->d.sign == NULL) return NULL;
    PKCS7 *inner = p7->d.sign->contents;
    if (inner == NULL || !PKCS7_type_is_data(inner)) return NULL;
    return inner->d.data;
}

// AppleTrust (JWS): the first OCSP responder URL of a certificate's AIA extension, copied into buf.
// Returns the URL length, 0 if the certificate names none, -1 if buf is too small.
static inline int iapgw_X509_first_ocsp_url(X509 *x, char *buf, int cap) {
    STACK_OF(OPENSSL_STRING) *urls = X509_get1_ocsp(x);
    if (urls == NULL) return 0;
    int result = 0;
    if (sk_OPENSSL_STRING_num(urls) > 0) {
        const char *u = sk_OPENSSL_STRING_value(urls, 0);
        size_t n = strlen(u);
        if ((int)n + 1 > cap) result = -1; else { memcpy(buf, u, n + 1); result = (int)n; }
    }
    X509_email_free(urls);
    return result;
}
static inline int iapgw_sk_PKCS7_SIGNER_INFO_num(const STACK_OF(PKCS7_SIGNER_INFO) *sk) { return sk_PKCS7_SIGNER_INFO_num(sk); }
/* The digest NID the first SignerInfo names (NID_undef when there is none). */
static inline int iapgw_PKCS7_first_signer_digest_nid(PKCS7 *p7) {
    STACK_OF(PKCS7_SIGNER_INFO) *infos = PKCS7_get_signer_info(p7);
    if (infos == NULL || sk_PKCS7_SIGNER_INFO_num(infos) < 1) return NID_undef;
    X509_ALGOR *digest = NULL;
    PKCS7_SIGNER_INFO_get0_algs(sk_PKCS7_SIGNER_INFO_value(infos, 0), NULL, &digest, NULL);
    if (digest == NULL) return NID_undef;
    const ASN1_OBJECT *object = NULL;
    X509_ALGOR_get0(&object, NULL, NULL, digest);
    return OBJ_obj2nid(object);
}

// AppleTrust (JWS): SHA-256 resumable from a saved state. The low-level API because its state is a
// plain struct, copied by value per call with no allocation (EVP_MD_CTX_copy_ex duplicates the
// provider's context on the heap); it runs the same block function (SHA-NI where present).
// Deprecated in OpenSSL 3.0, not removed: wrapped here so the warning is confined to these lines.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static inline int iapgw_SHA256_Init(SHA256_CTX *c) { return SHA256_Init(c); }
static inline int iapgw_SHA256_Update(SHA256_CTX *c, const void *data, size_t len) { return SHA256_Update(c, data, len); }
static inline int iapgw_SHA256_Final(unsigned char *md, SHA256_CTX *c) { return SHA256_Final(md, c); }
#pragma GCC diagnostic pop
#endif
