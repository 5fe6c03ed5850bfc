// chair_gpiod: the Linux GPIO character device (uAPI v2, what libgpiod v2 uses) for chair-agent.
//
// A small Node-API addon, so one binary serves every Node line (22, 24, 26) and nothing is
// compiled on the Pi: scripts/build-gpiod.mjs builds it for x64 and, with a cross compiler, for
// arm64. The JavaScript side (agent/gpio/gpiod-driver.ts) does everything else: finding lines by
// name, the bias rule, what an event means.
//
//   chipInfo(path)                     -> { name, label, lines }
//   lineInfo(path, offset)             -> { offset, name, consumer, used, direction, activeLow, bias, edge, debounceUs }
//   request(path, offset, config)      -> fd        config: { consumer, direction, activeLow, bias, edge, debounceUs, value }
//   getValue(fd) -> 0|1, setValue(fd, 0|1)
//   watch(fd, callback)                -> watcher   callback([{ rising, timestampMs, seqno }, ...], error?) on the event loop
//   unwatch(watcher), release(fd)
//
// Errors are thrown as Error objects whose `code` is the errno name (EACCES, EBUSY, ENOENT...).
// A watcher whose poll or read fails (the chip went away: ENODEV) stops, and its callback gets
// the events read before it and the error as its second argument, once; seqno is the line's
// event sequence number, so a gap says the kernel's event buffer overflowed.
#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/gpio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define CHECK(call)                                  \
  do {                                               \
    if ((call) != napi_ok) return throw_status(env); \
  } while (0)

static napi_value throw_status(napi_env env) {
  const napi_extended_error_info *info = NULL;
  napi_get_last_error_info(env, &info);
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) napi_throw_error(env, "ENAPI", info && info->error_message ? info->error_message : "Node-API call failed");
  return NULL;
}

static const char *errno_name(int e) {
  switch (e) {
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EBUSY: return "EBUSY";
    case EINVAL: return "EINVAL";
    case ENODEV: return "ENODEV";
    case ENXIO: return "ENXIO";
    case ENOTTY: return "ENOTTY";
    case EIO: return "EIO";
    case EAGAIN: return "EAGAIN";
    case ENOTSUP: return "ENOTSUP";
    case EBADF: return "EBADF";
    case ENOSYS: return "ENOSYS";
    default: return "EGPIO";
  }
}

static napi_value throw_errno(napi_env env, int e, const char *what, const char *path) {
  char msg[600];
  snprintf(msg, sizeof msg, "%s%s%s: %s", what, path ? " " : "", path ? path : "", strerror(e));
  napi_value code, message, err;
  napi_create_string_utf8(env, errno_name(e), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &err);
  napi_set_named_property(env, err, "code", code);
  napi_throw(env, err);
  return NULL;
}

static napi_value args_of(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return throw_status(env);
  if (argc < want) {
    napi_throw_type_error(env, "EARGS", "missing arguments");
    return NULL;
  }
  return argv[0];
}

static int get_path(napi_env env, napi_value v, char *out, size_t size) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, out, size, &len) != napi_ok) return -1;
  if (len + 1 >= size) return -1;
  return 0;
}

static napi_value make_string(napi_env env, const char *s, size_t max) {
  napi_value v;
  napi_create_string_utf8(env, s, strnlen(s, max), &v);
  return v;
}

/* A fixed-size field of a kernel struct, not always NUL-terminated. */
static void set_str(napi_env env, napi_value obj, const char *key, const char *s, size_t max) {
  napi_set_named_property(env, obj, key, make_string(env, s, max));
}

static void set_literal(napi_env env, napi_value obj, const char *key, const char *s) {
  napi_value v;
  napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, obj, key, v);
}

static void set_num(napi_env env, napi_value obj, const char *key, double n) {
  napi_value v;
  napi_create_double(env, n, &v);
  napi_set_named_property(env, obj, key, v);
}

static void set_bool(napi_env env, napi_value obj, const char *key, bool b) {
  napi_value v;
  napi_get_boolean(env, b, &v);
  napi_set_named_property(env, obj, key, v);
}

/* Reads an optional string property into out (empty when absent). */
static void opt_string(napi_env env, napi_value obj, const char *key, char *out, size_t size) {
  bool has = false;
  out[0] = '\0';
  if (napi_has_named_property(env, obj, key, &has) != napi_ok || !has) return;
  napi_value v;
  napi_get_named_property(env, obj, key, &v);
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t == napi_string) napi_get_value_string_utf8(env, v, out, size, NULL);
}

static double opt_number(napi_env env, napi_value obj, const char *key, double fallback) {
  bool has = false;
  if (napi_has_named_property(env, obj, key, &has) != napi_ok || !has) return fallback;
  napi_value v;
  napi_get_named_property(env, obj, key, &v);
  double d = fallback;
  if (napi_get_value_double(env, v, &d) != napi_ok) return fallback;
  return d;
}

static bool opt_bool(napi_env env, napi_value obj, const char *key) {
  bool has = false, b = false;
  if (napi_has_named_property(env, obj, key, &has) != napi_ok || !has) return false;
  napi_value v;
  napi_get_named_property(env, obj, key, &v);
  napi_get_value_bool(env, v, &b);
  return b;
}

static napi_value chip_info(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!args_of(env, info, 1, argv)) return NULL;
  char path[512];
  if (get_path(env, argv[0], path, sizeof path) != 0) return throw_errno(env, EINVAL, "bad path", NULL);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return throw_errno(env, errno, "cannot open", path);
  struct gpiochip_info ci;
  memset(&ci, 0, sizeof ci);
  int rc = ioctl(fd, GPIO_GET_CHIPINFO_IOCTL, &ci);
  int e = errno;
  close(fd);
  if (rc < 0) return throw_errno(env, e, "cannot read the chip info of", path);
  napi_value out;
  CHECK(napi_create_object(env, &out));
  set_str(env, out, "name", ci.name, sizeof ci.name);
  set_str(env, out, "label", ci.label, sizeof ci.label);
  set_num(env, out, "lines", ci.lines);
  return out;
}

static const char *bias_of(uint64_t flags) {
  if (flags & GPIO_V2_LINE_FLAG_BIAS_PULL_UP) return "pull-up";
  if (flags & GPIO_V2_LINE_FLAG_BIAS_PULL_DOWN) return "pull-down";
  if (flags & GPIO_V2_LINE_FLAG_BIAS_DISABLED) return "disabled";
  return "as-is";
}

static const char *edge_of(uint64_t flags) {
  bool r = flags & GPIO_V2_LINE_FLAG_EDGE_RISING, f = flags & GPIO_V2_LINE_FLAG_EDGE_FALLING;
  return r && f ? "both" : r ? "rising" : f ? "falling" : "none";
}

static napi_value line_info(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!args_of(env, info, 2, argv)) return NULL;
  char path[512];
  uint32_t offset = 0;
  if (get_path(env, argv[0], path, sizeof path) != 0) return throw_errno(env, EINVAL, "bad path", NULL);
  CHECK(napi_get_value_uint32(env, argv[1], &offset));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return throw_errno(env, errno, "cannot open", path);
  struct gpio_v2_line_info li;
  memset(&li, 0, sizeof li);
  li.offset = offset;
  int rc = ioctl(fd, GPIO_V2_GET_LINEINFO_IOCTL, &li);
  int e = errno;
  close(fd);
  if (rc < 0) return throw_errno(env, e, "cannot read a line of", path);
  uint32_t debounce = 0;
  for (uint32_t i = 0; i < li.num_attrs && i < GPIO_V2_LINE_NUM_ATTRS_MAX; i++) {
    if (li.attrs[i].id == GPIO_V2_LINE_ATTR_ID_DEBOUNCE) debounce = li.attrs[i].debounce_period_us;
  }
  napi_value out;
  CHECK(napi_create_object(env, &out));
  set_num(env, out, "offset", li.offset);
  set_str(env, out, "name", li.name, sizeof li.name);
  set_str(env, out, "consumer", li.consumer, sizeof li.consumer);
  set_bool(env, out, "used", li.flags & GPIO_V2_LINE_FLAG_USED);
  set_literal(env, out, "direction", li.flags & GPIO_V2_LINE_FLAG_OUTPUT ? "output" : "input");
  set_bool(env, out, "activeLow", li.flags & GPIO_V2_LINE_FLAG_ACTIVE_LOW);
  set_literal(env, out, "bias", bias_of(li.flags));
  set_literal(env, out, "edge", edge_of(li.flags));
  set_num(env, out, "debounceUs", debounce);
  return out;
}

static napi_value request_line(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (!args_of(env, info, 3, argv)) return NULL;
  char path[512], consumer[GPIO_MAX_NAME_SIZE], direction[16], bias[16], edge[16];
  uint32_t offset = 0;
  if (get_path(env, argv[0], path, sizeof path) != 0) return throw_errno(env, EINVAL, "bad path", NULL);
  CHECK(napi_get_value_uint32(env, argv[1], &offset));
  opt_string(env, argv[2], "consumer", consumer, sizeof consumer);
  opt_string(env, argv[2], "direction", direction, sizeof direction);
  opt_string(env, argv[2], "bias", bias, sizeof bias);
  opt_string(env, argv[2], "edge", edge, sizeof edge);
  double debounce = opt_number(env, argv[2], "debounceUs", 0);
  double value = opt_number(env, argv[2], "value", 0);
  bool active_low = opt_bool(env, argv[2], "activeLow");

  struct gpio_v2_line_request req;
  memset(&req, 0, sizeof req);
  req.offsets[0] = offset;
  req.num_lines = 1;
  snprintf(req.consumer, sizeof req.consumer, "%s", consumer[0] ? consumer : "chair-agent");
  uint64_t flags = 0;
  bool output = strcmp(direction, "output") == 0;
  flags |= output ? GPIO_V2_LINE_FLAG_OUTPUT : GPIO_V2_LINE_FLAG_INPUT;
  if (active_low) flags |= GPIO_V2_LINE_FLAG_ACTIVE_LOW;
  if (strcmp(bias, "pull-up") == 0) flags |= GPIO_V2_LINE_FLAG_BIAS_PULL_UP;
  else if (strcmp(bias, "pull-down") == 0) flags |= GPIO_V2_LINE_FLAG_BIAS_PULL_DOWN;
  else if (strcmp(bias, "disabled") == 0) flags |= GPIO_V2_LINE_FLAG_BIAS_DISABLED;
  if (!output) {
    if (strcmp(edge, "rising") == 0 || strcmp(edge, "both") == 0) flags |= GPIO_V2_LINE_FLAG_EDGE_RISING;
    if (strcmp(edge, "falling") == 0 || strcmp(edge, "both") == 0) flags |= GPIO_V2_LINE_FLAG_EDGE_FALLING;
  }
  req.config.flags = flags;
  uint32_t n = 0;
  if (output) {
    req.config.attrs[n].attr.id = GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES;
    req.config.attrs[n].attr.values = value != 0 ? 1 : 0;
    req.config.attrs[n].mask = 1;
    n++;
  } else if (debounce > 0) {
    req.config.attrs[n].attr.id = GPIO_V2_LINE_ATTR_ID_DEBOUNCE;
    req.config.attrs[n].attr.debounce_period_us = (uint32_t)debounce;
    req.config.attrs[n].mask = 1;
    n++;
  }
  req.config.num_attrs = n;

  int chip = open(path, O_RDONLY | O_CLOEXEC);
  if (chip < 0) return throw_errno(env, errno, "cannot open", path);
  int rc = ioctl(chip, GPIO_V2_GET_LINE_IOCTL, &req);
  int e = errno;
  close(chip);
  if (rc < 0) return throw_errno(env, e, "cannot request a line of", path);
  // Non-blocking, or a read after a spurious wake-up would block the event loop.
  int fl = fcntl(req.fd, F_GETFL);
  if (fl < 0 || fcntl(req.fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    e = errno;
    close(req.fd);
    return throw_errno(env, e, "cannot make a line non-blocking on", path);
  }
  napi_value out;
  CHECK(napi_create_int32(env, req.fd, &out));
  return out;
}

static int fd_arg(napi_env env, napi_value v) {
  int32_t fd = -1;
  napi_get_value_int32(env, v, &fd);
  return fd;
}

static napi_value get_value(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!args_of(env, info, 1, argv)) return NULL;
  struct gpio_v2_line_values vals = { .bits = 0, .mask = 1 };
  if (ioctl(fd_arg(env, argv[0]), GPIO_V2_LINE_GET_VALUES_IOCTL, &vals) < 0) return throw_errno(env, errno, "cannot read a line", NULL);
  napi_value out;
  CHECK(napi_create_uint32(env, (uint32_t)(vals.bits & 1), &out));
  return out;
}

static napi_value set_value(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!args_of(env, info, 2, argv)) return NULL;
  uint32_t v = 0;
  CHECK(napi_get_value_uint32(env, argv[1], &v));
  struct gpio_v2_line_values vals = { .bits = v ? 1 : 0, .mask = 1 };
  if (ioctl(fd_arg(env, argv[0]), GPIO_V2_LINE_SET_VALUES_IOCTL, &vals) < 0) return throw_errno(env, errno, "cannot set a line", NULL);
  return NULL;
}

typedef struct {
  uv_poll_t *poll;
  napi_env env;
  napi_ref callback;
  napi_async_context context;
  int fd;
  bool stopped;
} watcher_t;

static void on_poll_closed(uv_handle_t *handle) { free(handle); }

/* Stops the poll (once); the handle is freed when libuv has closed it. */
static void stop_poll(watcher_t *w) {
  if (w->stopped) return;
  w->stopped = true;
  uv_poll_stop(w->poll);
  w->poll->data = NULL;
  uv_close((uv_handle_t *)w->poll, on_poll_closed);
}

static napi_value error_value(napi_env env, const char *code_name, const char *text) {
  napi_value code, message, err;
  napi_create_string_utf8(env, code_name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &err);
  napi_set_named_property(env, err, "code", code);
  return err;
}

static void on_events(uv_poll_t *poll, int status, int events) {
  watcher_t *w = (watcher_t *)poll->data;
  if (!w || w->stopped) return;
  (void)events;
  napi_env env = w->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value list, error = NULL;
  napi_create_array(env, &list);
  uint32_t count = 0;
  char text[200];
  if (status < 0) {
    snprintf(text, sizeof text, "polling the line failed: %s", uv_strerror(status));
    error = error_value(env, uv_err_name(status), text);
  } else {
    struct gpio_v2_line_event ev[16];
    for (;;) {
      ssize_t n = read(w->fd, ev, sizeof ev);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
        snprintf(text, sizeof text, "reading the line's events failed: %s", strerror(errno));
        error = error_value(env, errno_name(errno), text);
        break;
      }
      if (n == 0) {
        /* End of file: the line's file is no longer backed by a chip. */
        error = error_value(env, "ENODEV", "the line's events ended: the GPIO chip is gone");
        break;
      }
      for (size_t i = 0; i < (size_t)n / sizeof ev[0]; i++) {
        napi_value o;
        napi_create_object(env, &o);
        set_bool(env, o, "rising", ev[i].id == GPIO_V2_LINE_EVENT_RISING_EDGE);
        set_num(env, o, "timestampMs", (double)ev[i].timestamp_ns / 1e6);
        set_num(env, o, "seqno", ev[i].line_seqno);
        napi_set_element(env, list, count++, o);
      }
      if ((size_t)n < sizeof ev) break;
    }
  }
  /* A failed watcher reports once and stops: the poll would fail again at every turn of the loop. */
  if (error) stop_poll(w);
  if (count > 0 || error) {
    napi_value cb, global, result;
    napi_value argv[2] = { list, NULL };
    napi_get_undefined(env, &argv[1]);
    if (error) argv[1] = error;
    if (napi_get_reference_value(env, w->callback, &cb) == napi_ok && napi_get_global(env, &global) == napi_ok &&
        napi_make_callback(env, w->context, global, cb, 2, argv, &result) == napi_pending_exception) {
      napi_value err;
      napi_get_and_clear_last_exception(env, &err);
      napi_fatal_exception(env, err);
    }
  }
  napi_close_handle_scope(env, scope);
}

static void free_watcher(napi_env env, watcher_t *w) {
  if (w->callback) napi_delete_reference(env, w->callback);
  if (w->context) napi_async_destroy(env, w->context);
  free(w);
}

static void finalize_watcher(napi_env env, void *data, void *hint) {
  (void)hint;
  watcher_t *w = (watcher_t *)data;
  stop_poll(w);
  free_watcher(env, w);
}

static napi_value watch(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!args_of(env, info, 2, argv)) return NULL;
  uv_loop_t *loop = NULL;
  CHECK(napi_get_uv_event_loop(env, &loop));
  watcher_t *w = calloc(1, sizeof *w);
  if (!w) return throw_errno(env, ENOMEM, "out of memory", NULL);
  w->env = env;
  w->fd = fd_arg(env, argv[0]);
  w->stopped = true; /* until the poll is started */
  w->poll = malloc(uv_handle_size(UV_POLL));
  if (!w->poll) {
    free(w);
    return throw_errno(env, ENOMEM, "out of memory", NULL);
  }
  int rc = uv_poll_init(loop, w->poll, w->fd);
  if (rc != 0) {
    free(w->poll);
    free(w);
    return throw_errno(env, rc == UV_EBADF || rc == UV_ENOTSOCK ? EBADF : -rc, "cannot watch a line", NULL);
  }
  w->poll->data = w;
  w->stopped = false;
  /* From here the handle is initialised: every failure closes it (stop_poll), never frees it. */
  napi_value name, handle;
  if (napi_create_string_utf8(env, "chair-agent:gpio-events", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_reference(env, argv[1], 1, &w->callback) != napi_ok ||
      napi_async_init(env, NULL, name, &w->context) != napi_ok) {
    stop_poll(w);
    free_watcher(env, w);
    return throw_status(env);
  }
  rc = uv_poll_start(w->poll, UV_READABLE, on_events);
  if (rc != 0) {
    stop_poll(w);
    free_watcher(env, w);
    return throw_errno(env, -rc, "cannot watch a line", NULL);
  }
  if (napi_create_external(env, w, finalize_watcher, NULL, &handle) != napi_ok) {
    stop_poll(w);
    free_watcher(env, w);
    return throw_status(env);
  }
  return handle;
}

static napi_value unwatch(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!args_of(env, info, 1, argv)) return NULL;
  watcher_t *w = NULL;
  CHECK(napi_get_value_external(env, argv[0], (void **)&w));
  if (w) stop_poll(w);
  return NULL;
}

static napi_value release_line(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!args_of(env, info, 1, argv)) return NULL;
  int fd = fd_arg(env, argv[0]);
  /* EINTR still closes the descriptor on Linux: retrying would close someone else's. */
  if (fd >= 0 && close(fd) < 0 && errno != EINTR) return throw_errno(env, errno, "cannot release a line", NULL);
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
    { "chipInfo", NULL, chip_info, NULL, NULL, NULL, napi_enumerable, NULL },
    { "lineInfo", NULL, line_info, NULL, NULL, NULL, napi_enumerable, NULL },
    { "request", NULL, request_line, NULL, NULL, NULL, napi_enumerable, NULL },
    { "getValue", NULL, get_value, NULL, NULL, NULL, napi_enumerable, NULL },
    { "setValue", NULL, set_value, NULL, NULL, NULL, napi_enumerable, NULL },
    { "watch", NULL, watch, NULL, NULL, NULL, napi_enumerable, NULL },
    { "unwatch", NULL, unwatch, NULL, NULL, NULL, napi_enumerable, NULL },
    { "release", NULL, release_line, NULL, NULL, NULL, napi_enumerable, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}
