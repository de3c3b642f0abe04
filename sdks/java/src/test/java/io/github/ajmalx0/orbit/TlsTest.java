package io.github.ajmalx0.orbit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Mutual TLS against a fake runtime that requires client certificates. The
 * certificates are made with the JDK's keytool: a CA, a server certificate
 * for 127.0.0.1 and a client certificate, all signed by the CA; the client's
 * key is written as the PKCS#8 PEM file the SDK reads.
 */
@Timeout(60)
class TlsTest {
    static final String PASSWORD = "changeit";

    @TempDir
    static Path dir;

    @BeforeAll
    static void makeCertificates() throws Exception {
        keytool("-genkeypair", "-alias", "ca", "-keyalg", "EC", "-dname", "CN=orbit test CA", "-ext", "bc:c",
                "-keystore", "ca.p12");
        keytool("-exportcert", "-alias", "ca", "-rfc", "-file", "ca.pem", "-keystore", "ca.p12");
        for (String[] leaf : new String[][] {{"server", "san=ip:127.0.0.1"}, {"client", "san=dns:worker.test"}}) {
            String name = leaf[0];
            keytool("-genkeypair", "-alias", name, "-keyalg", "EC", "-dname", "CN=" + name, "-keystore", name + ".p12");
            keytool("-certreq", "-alias", name, "-file", name + ".csr", "-keystore", name + ".p12");
            keytool("-gencert", "-alias", "ca", "-infile", name + ".csr", "-outfile", name + ".pem", "-rfc",
                    "-ext", leaf[1], "-keystore", "ca.p12");
            PrivateKey key = (PrivateKey) load(name + ".p12").getKey(name, PASSWORD.toCharArray());
            String pem = "-----BEGIN PRIVATE KEY-----\n"
                    + Base64.getMimeEncoder(64, "\n".getBytes()).encodeToString(key.getEncoded())
                    + "\n-----END PRIVATE KEY-----\n";
            Files.writeString(dir.resolve(name + ".key"), pem);
            // The chain the worker sends: leaf first, then the CA.
            Files.writeString(dir.resolve(name + "-chain.pem"),
                    Files.readString(dir.resolve(name + ".pem")) + Files.readString(dir.resolve("ca.pem")));
        }
    }

    static void keytool(String... args) throws Exception {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "keytool").toString()));
        command.addAll(List.of(args));
        command.addAll(List.of("-storepass", PASSWORD, "-keypass", PASSWORD, "-storetype", "PKCS12", "-noprompt"));
        Process p = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
        String output = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0, String.join(" ", command) + "\n" + output);
    }

    static KeyStore load(String file) throws Exception {
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (var in = Files.newInputStream(dir.resolve(file))) {
            store.load(in, PASSWORD.toCharArray());
        }
        return store;
    }

    static SSLContext serverContext() throws Exception {
        CertificateFactory x509 = CertificateFactory.getInstance("X.509");
        List<Certificate> chain = new ArrayList<>(x509.generateCertificates(
                new ByteArrayInputStream(Files.readAllBytes(dir.resolve("server-chain.pem")))));
        KeyStore keys = KeyStore.getInstance("PKCS12");
        keys.load(null, null);
        keys.setKeyEntry("server", load("server.p12").getKey("server", PASSWORD.toCharArray()),
                PASSWORD.toCharArray(), chain.toArray(new Certificate[0]));
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(keys, PASSWORD.toCharArray());
        KeyStore trust = KeyStore.getInstance("PKCS12");
        trust.load(null, null);
        trust.setCertificateEntry("ca", chain.get(chain.size() - 1));
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
        return context;
    }

    @Test
    void aWorkerServesOverMutualTls() throws Exception {
        try (FakeRuntime runtime = new FakeRuntime(serverContext(), true)) {
            Worker worker = Worker.builder()
                    .workerId("tls-java")
                    .server(runtime.url())
                    .token("")
                    .caCertFile(dir.resolve("ca.pem"))
                    .clientCert(dir.resolve("client-chain.pem"), dir.resolve("client.key"))
                    .concurrency(1)
                    .pollWait(Duration.ofMillis(300))
                    .build();
            worker.rawTask("echo", "1.0.0", (in, ctx) -> in);
            worker.start();
            try {
                runtime.queue("echo", Map.of("text", "secure"));
                assertEquals("secure",
                        runtime.nextResult(Duration.ofSeconds(20)).body().path("output").path("text").asText());
            } finally {
                assertTrue(worker.stop(Duration.ofSeconds(10)));
            }
        }
    }

    @Test
    void aKeyThatIsNotPkcs8IsRefusedWithAHint() throws Exception {
        Path rsa = dir.resolve("legacy.key");
        Files.writeString(rsa, "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n");
        UncheckedIOException e = assertThrows(UncheckedIOException.class, () -> Worker.builder()
                .server("https://127.0.0.1:1")
                .clientCert(dir.resolve("client.pem"), rsa)
                .build());
        assertTrue(e.getMessage().contains("openssl pkcs8 -topk8"), e.getMessage());
    }
}
