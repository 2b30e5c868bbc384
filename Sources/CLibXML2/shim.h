#ifndef WINBACK_CLIBXML2_SHIM_H
#define WINBACK_CLIBXML2_SHIM_H
#include <libxml/xmlversion.h>
// Debian's libxml2 is built with ICU and its encoding.h would pull in the system ICU headers,
// which clash with the ICU that Foundation bundles. Nothing here needs ICU converters.
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/xmlwriter.h>
#include <libxml/xmlschemas.h>
#include <libxml/xmlerror.h>
#endif
