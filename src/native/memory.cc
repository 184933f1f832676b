// What a long-running proxy process needs to keep its memory small and Node does not expose (used by
// src/agent/memory.ts; loaded with original_dst.c's functions as one addon by src/native/original-dst.ts).
//   releaseMemory()             -> undefined: V8's critical memory-pressure GC (a full, compacting collection that
//                                  also shrinks the young generation back to its initial size and returns free
//                                  heap pages to the system), then glibc's malloc_trim(0) (freed malloc memory
//                                  that glibc keeps, in the main heap and in every thread's arena).
//   releaseExecutablePages()    -> bytes: drops this process's mappings of its own executable's read-only pages
//                                  (MADV_DONTNEED on the clean, never-written mappings of /proc/self/exe). A
//                                  single executable is ~110 MB, of which start-up touches ~45 MB (Node's start-up
//                                  code, the V8 snapshot, the embedded chunks and code caches, read once); the
//                                  pages stay in the page cache, and those the proxy still runs fault back in on
//                                  their next use (a minor fault, no I/O). Mappings holding any private copy
//                                  (relocations) are left alone: dropping those would lose the copy.
// C++ only for the V8 calls (v8::Isolate has no C API); the binding itself is plain N-API. Built with the Node
// headers of the Node binary the executable is made from (scripts/native-addon.mjs), so the V8 ABI matches.
#define NAPI_VERSION 8
#include <node_api.h>
#include <v8.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <vector>

namespace {

napi_value undefined(napi_env env) {
  napi_value out;
  napi_get_undefined(env, &out);
  return out;
}

napi_value release_memory(napi_env env, napi_callback_info) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate != nullptr) isolate->MemoryPressureNotification(v8::MemoryPressureLevel::kCritical);
  malloc_trim(0);
  return undefined(env);
}

double release_executable_pages() {
  struct stat exe;
  if (stat("/proc/self/exe", &exe) != 0) return 0;
  FILE* f = fopen("/proc/self/smaps", "re");
  if (f == nullptr) return 0;
  struct Range {
    unsigned long start, end;
    bool candidate;
    bool anonymous;
  };
  std::vector<Range> ranges;
  char line[4096];
  while (fgets(line, sizeof line, f) != nullptr) {
    unsigned long start, end, offset, inode;
    unsigned int major, minor;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &start, &end, perms, &offset, &major, &minor, &inode) == 7) {
      bool mine = inode == exe.st_ino && makedev(major, minor) == exe.st_dev;
      ranges.push_back({start, end, mine && perms[0] == 'r' && perms[1] != 'w', false});
    } else if (!ranges.empty() && strncmp(line, "Anonymous:", 10) == 0) {
      ranges.back().anonymous = strtoul(line + 10, nullptr, 10) != 0;
    }
  }
  fclose(f);
  double released = 0;
  for (const Range& r : ranges) {
    if (!r.candidate || r.anonymous) continue;
    if (madvise(reinterpret_cast<void*>(r.start), r.end - r.start, MADV_DONTNEED) == 0) released += static_cast<double>(r.end - r.start);
  }
  return released;
}

napi_value release_executable(napi_env env, napi_callback_info) {
  napi_value out;
  napi_create_double(env, release_executable_pages(), &out);
  return out;
}

}  // namespace

// Called from original_dst.c's module init: one addon file, one dlopen.
extern "C" void mesh_memory_register(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"releaseMemory", nullptr, release_memory, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"releaseExecutablePages", nullptr, release_executable, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}
