// Native half of src/native/original-dst.ts: the socket options Node does not expose.
//   originalDst(fd)          -> { address, port } from SO_ORIGINAL_DST / IP6T_SO_ORIGINAL_DST, or the errno
//                               (a number) when the kernel has none (the connection was not NATed).
//   setTransparent(fd, v6)   -> 0, or the errno: IP_TRANSPARENT / IPV6_TRANSPARENT for TPROXY listeners.
//   dupFd(fd)                -> a new descriptor of the same socket (close-on-exec), or -errno: each engine
//                               worker thread listens on its own descriptor of a socket the main thread bound,
//                               so a worker closing (or dying) never closes the socket under the others.
//   transparentSocket(source, mark)
//                            -> a new, unconnected TCP socket (non-blocking, close-on-exec) bound to the
//                               IP literal `source` with port 0, IP_TRANSPARENT / IPV6_TRANSPARENT set first
//                               (binding to an address that is not local) and SO_MARK = mark when mark != 0;
//                               or { errno, step } naming the call that failed. Envoy's original_src filter
//                               gives upstream sockets exactly these options; Node's net.connect cannot set
//                               them before bind(), so the socket is made here and libuv connects it.
// Plain N-API in C: no node-addon-api, no node-gyp; it is compiled by scripts/native-addon.mjs with cc.
// The same addon file also carries memory.cc's functions (releaseMemory, releaseExecutablePages: src/agent/memory.ts).
#define NAPI_VERSION 8
#include <node_api.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

// <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h> clash with glibc's headers; the
// values are part of the kernel ABI.
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif
#ifndef IP_TRANSPARENT
#define IP_TRANSPARENT 19
#endif
#ifndef IPV6_TRANSPARENT
#define IPV6_TRANSPARENT 75
#endif

static napi_value number(napi_env env, int v) {
  napi_value out;
  napi_create_int32(env, v, &out);
  return out;
}

static int fd_arg(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return -1;
  int32_t fd = -1;
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok) return -1;
  return fd;
}

static napi_value address_object(napi_env env, const struct sockaddr_storage *ss) {
  char text[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  napi_value obj, address, p;
  napi_create_object(env, &obj);
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &address);
  napi_create_int32(env, port, &p);
  napi_set_named_property(env, obj, "address", address);
  napi_set_named_property(env, obj, "port", p);
  return obj;
}

static napi_value original_dst(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  int fd = fd_arg(env, info, 1, argv);
  if (fd < 0) {
    napi_throw_type_error(env, NULL, "originalDst(fd): a file descriptor is required");
    return NULL;
  }
  struct sockaddr_storage local;
  socklen_t len = sizeof local;
  if (getsockname(fd, (struct sockaddr *)&local, &len) != 0) return number(env, errno);
  struct sockaddr_storage orig;
  memset(&orig, 0, sizeof orig);
  len = sizeof orig;
  int rc;
  if (local.ss_family == AF_INET) {
    rc = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &len);
  } else if (local.ss_family == AF_INET6) {
    // An IPv4 connection accepted on a dual-stack socket was tracked (and NATed) as IPv4.
    const struct sockaddr_in6 *l6 = (const struct sockaddr_in6 *)&local;
    if (IN6_IS_ADDR_V4MAPPED(&l6->sin6_addr)) rc = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &len);
    else rc = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &orig, &len);
  } else {
    return number(env, EAFNOSUPPORT);
  }
  if (rc != 0) return number(env, errno);
  if (orig.ss_family != AF_INET && orig.ss_family != AF_INET6) return number(env, EAFNOSUPPORT);
  return address_object(env, &orig);
}

static napi_value set_transparent(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  int fd = fd_arg(env, info, 2, argv);
  if (fd < 0) {
    napi_throw_type_error(env, NULL, "setTransparent(fd, ipv6): a file descriptor is required");
    return NULL;
  }
  bool v6 = false;
  napi_get_value_bool(env, argv[1], &v6);
  int one = 1;
  int rc = v6 ? setsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &one, sizeof one) : setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof one);
  return number(env, rc == 0 ? 0 : errno);
}

static napi_value dup_fd(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  int fd = fd_arg(env, info, 1, argv);
  if (fd < 0) {
    napi_throw_type_error(env, NULL, "dupFd(fd): a file descriptor is required");
    return NULL;
  }
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  return number(env, copy >= 0 ? copy : -errno);
}

static napi_value failure(napi_env env, int err, const char *step) {
  napi_value obj, s;
  napi_create_object(env, &obj);
  napi_set_named_property(env, obj, "errno", number(env, err));
  napi_create_string_utf8(env, step, NAPI_AUTO_LENGTH, &s);
  napi_set_named_property(env, obj, "step", s);
  return obj;
}

static napi_value transparent_socket(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  char text[INET6_ADDRSTRLEN + 1] = {0};
  size_t len = 0;
  uint32_t mark = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      napi_get_value_string_utf8(env, argv[0], text, sizeof text, &len) != napi_ok || len >= sizeof text - 1 ||
      napi_get_value_uint32(env, argv[1], &mark) != napi_ok) {
    napi_throw_type_error(env, NULL, "transparentSocket(source, mark): an IP address and a mark are required");
    return NULL;
  }
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t sslen;
  int family;
  struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, text, &a4->sin_addr) == 1) {
    family = a4->sin_family = AF_INET;
    sslen = sizeof *a4;
  } else if (inet_pton(AF_INET6, text, &a6->sin6_addr) == 1) {
    family = a6->sin6_family = AF_INET6;
    sslen = sizeof *a6;
  } else {
    return failure(env, EINVAL, "source address");
  }
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return failure(env, errno, "socket");
  int one = 1;
  int rc = family == AF_INET ? setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof one) : setsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &one, sizeof one);
  const char *step = family == AF_INET ? "IP_TRANSPARENT" : "IPV6_TRANSPARENT";
  if (rc == 0 && mark != 0) {
    rc = setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark);
    step = "SO_MARK";
  }
  if (rc == 0) {
    rc = bind(fd, (struct sockaddr *)&ss, sslen);
    step = "bind";
  }
  if (rc != 0) {
    int err = errno;
    close(fd);
    return failure(env, err, step);
  }
  return number(env, fd);
}

// memory.cc; weak: an addon built without a C++ compiler has only the functions above
void mesh_memory_register(napi_env env, napi_value exports) __attribute__((weak));

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"originalDst", NULL, original_dst, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setTransparent", NULL, set_transparent, NULL, NULL, NULL, napi_enumerable, NULL},
    {"dupFd", NULL, dup_fd, NULL, NULL, NULL, napi_enumerable, NULL},
    {"transparentSocket", NULL, transparent_socket, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  if (mesh_memory_register) mesh_memory_register(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
