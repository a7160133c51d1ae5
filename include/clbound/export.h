/* clbound/export.h: the CLB_API visibility macro for the public functions. */
#ifndef CLB_EXPORT_H
#define CLB_EXPORT_H

#if defined(CLBOUND_STATIC)
#define CLB_API
#elif defined(_WIN32)
#ifdef CLBOUND_BUILDING
#define CLB_API __declspec(dllexport)
#else
#define CLB_API __declspec(dllimport)
#endif
#else
#define CLB_API __attribute__((visibility("default")))
#endif

#endif /* CLB_EXPORT_H */
