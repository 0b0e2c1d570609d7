#pragma once
// A small JSON Schema validator for tool arguments and results: the subset tool schemas use.
// Errors name the path of the offending value so the model can fix its call:
//   arguments.run_id: expected an integer, got "abc"
//
// Supported: type (one name or a list), properties, required, additionalProperties (false or a
// schema), enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength,
// maxLength (in characters), items (one schema), minItems, maxItems, uniqueItems. Annotations
// (description, title, default, examples, format, $schema) are accepted and not enforced; other
// keywords are ignored by ValidateJson and refused by CheckSchemaSupported.
#include <string>

#include "common/status.h"
#include "model/spec.h"  // Json

namespace drover::mcp {

// InvalidArgument naming the first value that does not match, or Ok.
Status ValidateJson(const Json& value, const Json& schema, const std::string& path = "arguments");

// Refuses a schema that uses keywords ValidateJson would ignore (pattern, anyOf, $ref, ...), an
// unknown type name, or a required property that additionalProperties:false makes impossible.
Status CheckSchemaSupported(const Json& schema, const std::string& path = "schema");

}  // namespace drover::mcp
