#ifndef WINBACK_CLIBXML2_SHIM_H
#define WINBACK_CLIBXML2_SHIM_H
#include <libxml/parser.h>
#include <libxml/xmlwriter.h>
#include <libxml/xmlschemas.h>
#include <libxml/xmlerror.h>
#endif
