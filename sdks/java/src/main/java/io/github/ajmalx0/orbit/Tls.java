package io.github.ajmalx0.orbit;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/**
 * Builds the SSLContext for ORBIT_CA_CERT and ORBIT_CLIENT_CERT/KEY from PEM
 * files. An extra CA is trusted beside the JDK's own trust store, not in
 * place of it. Keys must be unencrypted PKCS#8 (RSA or EC): the JDK reads
 * nothing else without a third-party library.
 */
final class Tls {
    private Tls() {}

    static SSLContext context(Path caCert, Path clientCert, Path clientKey) {
        try {
            TrustManager[] trust = null;
            if (caCert != null) {
                KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
                store.load(null, null);
                int n = 0;
                for (X509Certificate system : systemIssuers()) {
                    store.setCertificateEntry("system-" + n++, system);
                }
                for (Certificate extra : certificates(caCert)) {
                    store.setCertificateEntry("orbit-ca-" + n++, extra);
                }
                TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
                tmf.init(store);
                trust = tmf.getTrustManagers();
            }
            javax.net.ssl.KeyManager[] keys = null;
            if (clientCert != null) {
                List<Certificate> chain = certificates(clientCert);
                PrivateKey key = privateKey(clientKey);
                KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
                store.load(null, null);
                char[] password = new char[0];
                store.setKeyEntry("orbit-client", key, password, chain.toArray(new Certificate[0]));
                KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
                kmf.init(store, password);
                keys = kmf.getKeyManagers();
            }
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(keys, trust, null);
            return context;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (GeneralSecurityException e) {
            throw new UncheckedIOException(new IOException("cannot set up TLS: " + e.getMessage(), e));
        }
    }

    private static List<X509Certificate> systemIssuers() throws GeneralSecurityException {
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init((KeyStore) null);
        List<X509Certificate> issuers = new ArrayList<>();
        for (TrustManager tm : tmf.getTrustManagers()) {
            if (tm instanceof X509TrustManager x509) {
                issuers.addAll(List.of(x509.getAcceptedIssuers()));
            }
        }
        return issuers;
    }

    private static List<Certificate> certificates(Path pem) throws IOException, GeneralSecurityException {
        byte[] data = read(pem);
        Collection<? extends Certificate> certs;
        try (InputStream in = new ByteArrayInputStream(data)) {
            certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
        } catch (GeneralSecurityException e) {
            throw new IOException(pem + ": not a PEM certificate file (" + e.getMessage() + ")", e);
        }
        if (certs.isEmpty()) {
            throw new IOException(pem + ": no certificate found");
        }
        return new ArrayList<>(certs);
    }

    private static PrivateKey privateKey(Path pem) throws IOException {
        String text = new String(read(pem), StandardCharsets.US_ASCII);
        String begin = "-----BEGIN PRIVATE KEY-----";
        int start = text.indexOf(begin);
        int end = text.indexOf("-----END PRIVATE KEY-----");
        if (start < 0 || end < start) {
            throw new IOException(pem + ": expected an unencrypted PKCS#8 key (BEGIN PRIVATE KEY); convert it with "
                    + "`openssl pkcs8 -topk8 -nocrypt -in old.key -out worker.key`");
        }
        byte[] der = Base64.getMimeDecoder().decode(text.substring(start + begin.length(), end));
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(der);
        for (String algorithm : List.of("RSA", "EC")) {
            try {
                return KeyFactory.getInstance(algorithm).generatePrivate(spec);
            } catch (GeneralSecurityException ignored) {
                // try the next algorithm
            }
        }
        throw new IOException(pem + ": the private key is neither RSA nor EC");
    }

    private static byte[] read(Path path) throws IOException {
        try {
            return Files.readAllBytes(path);
        } catch (IOException e) {
            throw new IOException("cannot read " + path + ": " + e, e);
        }
    }
}
