#ifndef REACTIVEUV_COPENSSL_SHIM_H
#define REACTIVEUV_COPENSSL_SHIM_H

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>

/* ReactiveUV's TLS is written against OpenSSL 3 (Debian 12's libssl-dev 3.0). */
#if !defined(OPENSSL_VERSION_MAJOR) || OPENSSL_VERSION_MAJOR < 3
#error "ReactiveUV needs OpenSSL >= 3.0: install it with `apt-get install libssl-dev`"
#endif

/* The calls below are macros in OpenSSL's headers, which Swift cannot call. */

static inline int ruv_ssl_ctx_set_versions(SSL_CTX *context) {
    if (!SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION)) return 0;
    return (int)SSL_CTX_set_max_proto_version(context, TLS1_3_VERSION);
}

/* No renegotiation (TLS 1.2 peers asking get an alert), no compression; memory BIOs take every
 * byte, so a write is never partial and its buffer may move between calls. */
static inline void ruv_ssl_ctx_set_defaults(SSL_CTX *context) {
    SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(context, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
}

static inline long ruv_ssl_set_server_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

static inline size_t ruv_bio_pending(BIO *bio) {
    return BIO_ctrl_pending(bio);
}

/* A memory BIO that answers "retry" when empty (not EOF): the next read from the socket refills it. */
static inline BIO *ruv_bio_new_memory(void) {
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio != NULL) BIO_set_mem_eof_return(bio, -1);
    return bio;
}

/* The server's choice of certificate by the client's SNI: `callback` may switch the session's SSL_CTX. */
static inline void ruv_ssl_ctx_set_servername_callback(SSL_CTX *context, int (*callback)(SSL *, int *, void *), void *argument) {
    SSL_CTX_set_tlsext_servername_callback(context, callback);
    SSL_CTX_set_tlsext_servername_arg(context, argument);
}

/* A client keeps the sessions (TLS 1.2) and tickets (TLS 1.3) it is given, through `callback`
 * only: the internal store is keyed by session id, not by the server it was made with. */
static inline void ruv_ssl_ctx_set_client_session_cache(SSL_CTX *context, int (*callback)(SSL *, SSL_SESSION *)) {
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(context, callback);
}

/* A subject in one line, "CN=client,O=Example". */
static inline unsigned long ruv_name_flags_rfc2253(void) {
    return XN_FLAG_RFC2253;
}

#endif
