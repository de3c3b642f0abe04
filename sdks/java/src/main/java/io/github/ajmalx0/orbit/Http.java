package io.github.ajmalx0.orbit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import javax.net.ssl.SSLContext;

/**
 * POSTs JSON to one runtime over java.net.http.
 *
 * <p>HTTP/1.1 is asked for explicitly: the runtime speaks it on plain
 * connections, and the client would otherwise send an h2c upgrade with every
 * request. An interrupt of the calling thread ends a request in progress,
 * which is how shutdown closes open long polls.
 */
final class Http {
    private final HttpClient client;
    private final String base;
    private final String authorization;
    private final ObjectMapper mapper;
    private final Duration timeout;

    Http(String server, String token, SSLContext ssl, ObjectMapper mapper, Duration timeout) {
        URI uri = URI.create(server);
        if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) || uri.getHost() == null) {
            throw new IllegalArgumentException(
                    "invalid ORBIT server URL '" + server + "': expected http:// or https://");
        }
        HttpClient.Builder builder = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(10));
        if (ssl != null) {
            builder.sslContext(ssl);
        }
        this.client = builder.build();
        this.base = server.replaceAll("/+$", "");
        this.authorization = token == null ? null : "Bearer " + token;
        this.mapper = mapper;
        this.timeout = timeout;
    }

    /** The decoded answer, or null for 204 and empty bodies. */
    JsonNode post(String path, Object body) throws InterruptedException {
        byte[] payload;
        try {
            payload = mapper.writeValueAsBytes(body);
        } catch (IOException e) {
            throw new IllegalArgumentException("request body is not JSON: " + e.getMessage(), e);
        }
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(base + path))
                .timeout(timeout)
                .header("content-type", "application/json")
                .header("user-agent", Worker.USER_AGENT)
                .POST(HttpRequest.BodyPublishers.ofByteArray(payload));
        if (authorization != null) {
            request.header("authorization", authorization);
        }
        HttpResponse<byte[]> response;
        try {
            response = client.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
        } catch (IOException e) {
            String reason = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
            throw ApiException.connection("cannot reach the ORBIT runtime at " + base + ": " + reason);
        }
        int status = response.statusCode();
        byte[] data = response.body();
        if (status >= 200 && status < 300) {
            if (data == null || data.length == 0) {
                return null;
            }
            try {
                return mapper.readTree(data);
            } catch (IOException e) {
                throw new ApiException(status, ApiException.HTTP_ERROR, "the answer is not JSON: " + e.getMessage());
            }
        }
        throw error(status, data);
    }

    private ApiException error(int status, byte[] data) {
        String text = data == null ? "" : new String(data, StandardCharsets.UTF_8);
        try {
            JsonNode error = mapper.readTree(text).path("error");
            if (error.path("code").isTextual()) {
                return new ApiException(status, error.path("code").asText(), error.path("message").asText(""));
            }
        } catch (IOException | RuntimeException ignored) {
            // Not the runtime's error object: report the text as it is.
        }
        String detail = text.strip();
        if (detail.length() > 2000) {
            detail = detail.substring(0, 1999) + "…";
        }
        return new ApiException(status, ApiException.HTTP_ERROR, detail.isEmpty() ? "HTTP " + status : detail);
    }

    String base() {
        return base;
    }
}
