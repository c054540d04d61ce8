#include "shared_field_reader.h"

#include <string>

namespace cutline::proto {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;

Error SharedFieldReader::field_error(std::string_view field, std::string_view what) const {
  std::string msg(context_);
  msg.append(field).append(" ").append(what);
  return make_error(ErrorKind::kUpstream, std::move(msg));
}

bool SharedFieldReader::read(std::string_view key, od::value& value, Status& status) {
  status = {};
  if (key == "usage") {
    std::string_view bad_key;
    if (json_scan::read_usage(value, usage_, bad_key) != SUCCESS) {
      status = field_error(bad_key, "must be an object of integers");
    }
  } else if (key == "error") {
    if (json_scan::is_null(value)) return true;
    json_scan::ErrorFields ef;
    std::string_view message;
    od::object eobj;
    if (value.get_string().get(message) == SUCCESS) {
      ef.message = message;  // {"error": "text"} from simpler servers
    } else if (value.get_object().get(eobj) != SUCCESS ||
               json_scan::read_error_object(eobj, ef) != SUCCESS) {
      status = field_error("error", "must be an object with string fields");
      return true;
    }
    error_ = ef;
  } else if (key == "cutline") {
    od::object cobj;
    if (value.get_object().get(cobj) != SUCCESS) {
      status = field_error("cutline", "must be an object");
      return true;
    }
    auto rec = parse_stop_record(cobj);
    if (!rec) {
      status = make_error(ErrorKind::kUpstream, std::string(context_) + rec.error().message);
      return true;
    }
    cutline_ = std::move(*rec);
  } else {
    simdjson::error_code e = SUCCESS;
    if (!json_scan::read_error_field(key, value, top_error_, e)) return false;
    if (e) status = field_error(key, "must be a string, a number or null");
  }
  return true;
}

std::optional<json_scan::ErrorFields> SharedFieldReader::error(std::string_view object) const {
  if (error_) return error_;
  if (object == "error") return top_error_;
  return std::nullopt;
}

}  // namespace cutline::proto
