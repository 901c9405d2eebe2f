// Windows only: keeps knn_gpgpu.dll mapped until the process exits.
//
// OpenMP worker threads outlive the calls that started them and may still be
// spinning in the runtime's code (libgomp linked into this DLL, or the DLLs it
// uses) when the host calls FreeLibrary. If the DLL were unmapped then, those
// threads would run unmapped code and crash the host. Pinning the module
// (the Windows counterpart of -z nodelete on Linux) makes FreeLibrary leave
// it loaded, so unloading after use is always safe; the memory is released
// when the process exits.
#include <windows.h>

namespace {
const char module_anchor = 0;  // any address inside this DLL's image
}

extern "C" BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved) {
  (void)instance;
  (void)reserved;
  if (reason == DLL_PROCESS_ATTACH) {
    // Safe under the loader lock: no library is loaded, only a reference
    // count is set on this (already loaded) module.
    HMODULE self = nullptr;
    GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                       reinterpret_cast<LPCWSTR>(&module_anchor), &self);
  }
  return TRUE;
}
