package io.github.ajmalx0.orbit;

import java.text.MessageFormat;
import java.util.List;
import java.util.ResourceBundle;
import java.util.concurrent.CopyOnWriteArrayList;

/** A System.Logger that keeps its messages for assertions. */
final class CapturingLogger implements System.Logger {
    private final List<String> lines = new CopyOnWriteArrayList<>();
    private final List<String> leveled = new CopyOnWriteArrayList<>();

    List<String> lines() {
        return lines;
    }

    /** The messages logged at {@code level}. */
    List<String> at(Level level) {
        String prefix = level.getName() + " ";
        return leveled.stream().filter(l -> l.startsWith(prefix)).map(l -> l.substring(prefix.length())).toList();
    }

    @Override
    public String getName() {
        return "capture";
    }

    @Override
    public boolean isLoggable(Level level) {
        return true;
    }

    @Override
    public void log(Level level, ResourceBundle bundle, String msg, Throwable thrown) {
        lines.add(msg);
        leveled.add(level.getName() + " " + msg);
    }

    @Override
    public void log(Level level, ResourceBundle bundle, String format, Object... params) {
        String msg = params == null || params.length == 0 ? format : MessageFormat.format(format, params);
        lines.add(msg);
        leveled.add(level.getName() + " " + msg);
    }
}
