"""What Home Assistant shows for MQTT-discovered entities, given the messages it received.

The templates are rendered by Jinja2 in the sandbox Home Assistant renders them in; what is done
with the result is ported from Home Assistant's source (home-assistant/core, 2026):

- helpers/template: Template.async_render_with_possible_json_value: `value` is the payload,
  `value_json` the payload parsed as JSON when it parses, the result stripped; a template that
  raises leaves the state as it was (the MQTT platforms pass a default). TemplateEnvironment is an
  ImmutableSandboxedEnvironment whose Undefined logs "Template variable warning" when printed and
  "Template variable error" when used further: both are reported here as problems.
- components/mqtt/sensor.py, MqttSensor._update_state: "None" makes the state unknown; a sensor
  that must be numeric ignores an empty result and takes any other; one without a device class
  takes the text (over 255 characters is refused); a timestamp must parse as a date and time.
  MqttSensor._update_last_reset: last_reset_value_template's result, when not empty, must parse
  as a date and time ("Invalid last_reset message" otherwise).
- components/sensor/__init__.py: _numeric_state_expected, and SensorEntity.state, which refuses
  a numeric sensor's non-numeric value and a timestamp without a time zone, and warns of a state
  class or unit its device class does not allow (components/sensor/const.py:
  DEVICE_CLASS_STATE_CLASSES and DEVICE_CLASS_UNITS, here for the device classes the agent uses);
  SensorEntity.state_attributes, which shows last_reset only for state class total and warns
  when another state class sets it.
- components/sensor/recorder.py, reset_detected: a total_increasing sensor whose state falls by
  less than a tenth is "not strictly increasing" (warn_dip, a warning), by more a new meter whose
  figure the statistics count again (reported here too: right at the day's start, where a fall
  to 0 is not reported, and a count made twice anywhere else).
- components/mqtt/binary_sensor.py: payload_on (default "ON"), payload_off ("OFF") or "None";
  an empty result is ignored, anything else is "No matching payload found" and ignored.
- components/mqtt/discovery.py, async_discovery_message_received: a config's abbreviated keys
  are replaced (_replace_all_abbreviations, with abbreviations.py's tables for the keys the three
  platforms take) and then its topic base "~" (_replace_topic_base), before it is used.
- components/mqtt/entity.py, MqttAvailabilityMixin: each availability topic's template result
  must equal its payload_available or payload_not_available; availability_mode latest (default),
  all or any; an entity with no availability topic is available.

stdin: {"discoveryPrefix", "messages": [{"topic", "payload"}]} in the order received, the
discovery configs among them: entities come and go with them (over_time). stdout:
{"entities": [{"unique_id", "platform", "state", "available", "last_reset", "problems", "removed"}]},
with state as Home Assistant shows it ("unavailable", "unknown", "on", "off", or the value), and
last_reset the attribute as shown (ISO 8601), or null.
"""
import json
import math
import sys
from datetime import datetime, timezone

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

PAYLOAD_NONE = "None"
MAX_LENGTH_STATE_STATE = 255
NON_NUMERIC_DEVICE_CLASSES = {"date", "enum", "timestamp"}
STATE_CLASSES = {"measurement", "measurement_angle", "total", "total_increasing"}
# components/sensor/const.py; a device class missing here fails the check, to be added from there.
DEVICE_CLASS_STATE_CLASSES = {
    "duration": STATE_CLASSES,
    "timestamp": set(),
    "date": set(),
    "enum": set(),
    "monetary": {"total"},
}
DEVICE_CLASS_UNITS = {
    "duration": {"\u03bcs", "ms", "s", "min", "h", "d", "w", "m", "y"},  # UnitOfTime
}

# components/mqtt/abbreviations.py: ABBREVIATIONS (also for each availability item),
# DEVICE_ABBREVIATIONS and ORIGIN_ABBREVIATIONS, for the keys of sensor, binary_sensor and button.
ABBREVIATIONS = {
    "avty": "availability", "avty_mode": "availability_mode", "avty_t": "availability_topic",
    "avty_tpl": "availability_template", "cmd_t": "command_topic", "cmd_tpl": "command_template",
    "def_ent_id": "default_entity_id", "dev": "device", "dev_cla": "device_class", "e": "encoding",
    "en": "enabled_by_default", "ent_cat": "entity_category", "ent_pic": "entity_picture",
    "exp_aft": "expire_after", "frc_upd": "force_update", "ic": "icon", "json_attr_t": "json_attributes_topic",
    "json_attr_tpl": "json_attributes_template", "lrst_val_tpl": "last_reset_value_template", "name": "name",
    "o": "origin", "obj_id": "object_id", "off_dly": "off_delay", "ops": "options",
    "pl_avail": "payload_available", "pl_not_avail": "payload_not_available", "pl_off": "payload_off",
    "pl_on": "payload_on", "pl_prs": "payload_press", "ret": "retain", "stat_cla": "state_class",
    "stat_t": "state_topic", "sug_dsp_prc": "suggested_display_precision", "t": "topic",
    "uniq_id": "unique_id", "unit_of_meas": "unit_of_measurement", "val_tpl": "value_template",
}
DEVICE_ABBREVIATIONS = {
    "cns": "connections", "cu": "configuration_url", "ids": "identifiers", "name": "name", "mf": "manufacturer",
    "mdl": "model", "mdl_id": "model_id", "hw": "hw_version", "sw": "sw_version", "sa": "suggested_area",
    "sn": "serial_number",
}
ORIGIN_ABBREVIATIONS = {"name": "name", "sw": "sw_version", "url": "support_url"}
TOPIC_BASE = "~"


def _replace_abbreviations(payload, abbreviations):
    if not isinstance(payload, dict):
        return
    for key in set(abbreviations).intersection(payload):
        payload[abbreviations[key]] = payload.pop(key)


def expand_discovery(payload):
    """_replace_all_abbreviations, then _replace_topic_base, as discovery.py does."""
    _replace_abbreviations(payload, ABBREVIATIONS)
    if "origin" in payload:
        _replace_abbreviations(payload["origin"], ORIGIN_ABBREVIATIONS)
    if "device" in payload:
        _replace_abbreviations(payload["device"], DEVICE_ABBREVIATIONS)
    if "availability" in payload:
        for availability_conf in payload["availability"] if isinstance(payload["availability"], list) else [payload["availability"]]:
            _replace_abbreviations(availability_conf, ABBREVIATIONS)
    if TOPIC_BASE in payload:
        base = payload.pop(TOPIC_BASE)
        for key, value in payload.items():
            if isinstance(value, str) and value:
                if value[0] == TOPIC_BASE and key.endswith("topic"):
                    payload[key] = f"{base}{value[1:]}"
                if value[-1] == TOPIC_BASE and key.endswith("topic"):
                    payload[key] = f"{value[:-1]}{base}"
        if payload.get("availability"):
            for availability_conf in payload["availability"] if isinstance(payload["availability"], list) else [payload["availability"]]:
                if not isinstance(availability_conf, dict):
                    continue
                if topic := str(availability_conf.get("topic")):
                    if topic[0] == TOPIC_BASE:
                        availability_conf["topic"] = f"{base}{topic[1:]}"
                    if topic[-1] == TOPIC_BASE:
                        availability_conf["topic"] = f"{topic[:-1]}{base}"
    return payload


def make_environment(problems):
    class LoggingUndefined(jinja2.Undefined):
        def _fail_with_undefined_error(self, *args, **kwargs):
            try:
                return super()._fail_with_undefined_error(*args, **kwargs)
            except self._undefined_exception as ex:
                problems.append(f"Template variable error: {ex}")
                raise

        def __str__(self):
            problems.append(f"Template variable warning: {self._undefined_message}")
            return super().__str__()

        def __iter__(self):
            problems.append(f"Template variable warning: {self._undefined_message}")
            return super().__iter__()

        def __bool__(self):
            problems.append(f"Template variable warning: {self._undefined_message}")
            return super().__bool__()

    return ImmutableSandboxedEnvironment(undefined=LoggingUndefined)


def render(template, payload, problems):
    """The result, or None where Home Assistant keeps the state as it was."""
    if template is None:
        return payload
    variables = {"value": payload}
    try:
        variables["value_json"] = json.loads(payload)
    except ValueError:
        pass
    try:
        return make_environment(problems).from_string(template).render(**variables).strip()
    except Exception as ex:  # Home Assistant logs "Error parsing value" and keeps the old state
        problems.append(f"Error rendering {template!r} with {payload!r}: {type(ex).__name__}: {ex}")
        return None


def parse_datetime(text):
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        return None


def numeric_expected(config):
    if config.get("device_class") in NON_NUMERIC_DEVICE_CLASSES:
        return False
    if any(config.get(k) is not None for k in ("state_class", "unit_of_measurement", "suggested_display_precision")):
        return True
    return config.get("device_class") is not None


class Entity:
    def __init__(self, platform, config):
        self.platform = platform
        self.config = config
        self.value = None  # None: unknown
        self.last_reset = None
        self.problems = []
        self.removed = False
        self.previous_number = None  # the recorder's previous float state
        if "availability" in config:
            self.avail = {a["topic"]: a for a in config["availability"]}
        elif "availability_topic" in config:
            self.avail = {config["availability_topic"]: {
                "topic": config["availability_topic"],
                "value_template": config.get("availability_template"),
                "payload_available": config.get("payload_available", "online"),
                "payload_not_available": config.get("payload_not_available", "offline"),
            }}
        else:
            self.avail = {}
        self.available_by_topic = {t: False for t in self.avail}
        self.latest = False
        if platform == "sensor":
            self.check_classes()

    def check_classes(self):
        device_class = self.config.get("device_class")
        state_class = self.config.get("state_class")
        unit = self.config.get("unit_of_measurement")
        if device_class is None:
            return
        if device_class not in DEVICE_CLASS_STATE_CLASSES:
            self.problems.append(f"device class {device_class!r}: not in this port's table (add it from sensor/const.py)")
            return
        if state_class is not None and state_class not in DEVICE_CLASS_STATE_CLASSES[device_class]:
            self.problems.append(f"is using state class {state_class!r} which is impossible considering device class {device_class!r}")
        if device_class in NON_NUMERIC_DEVICE_CLASSES and unit is not None:
            self.problems.append(f"a {device_class} sensor cannot have a unit of measurement ({unit!r})")
        if device_class in DEVICE_CLASS_UNITS and unit not in DEVICE_CLASS_UNITS[device_class]:
            self.problems.append(f"is using native unit of measurement {unit!r} which is not a valid unit for the device class {device_class!r}")

    def topics(self):
        return ([self.config["state_topic"]] if "state_topic" in self.config else []) + list(self.avail)

    def update(self, config):
        """A new config for a discovered entity: kept, with its state, and subscribed anew."""
        kept = (self.value, self.last_reset, self.problems, self.latest, self.available_by_topic)
        self.__init__(self.platform, config)
        self.value, self.last_reset, problems, self.latest, by_topic = kept
        self.problems = problems + self.problems
        for t in self.available_by_topic:
            self.available_by_topic[t] = by_topic.get(t, False)

    def receive(self, topic, payload):
        if topic == self.config.get("state_topic"):
            self.on_state(payload)
        if topic in self.avail:
            self.on_availability(topic, payload)

    def on_availability(self, topic, payload):
        a = self.avail[topic]
        result = render(a.get("value_template"), payload, self.problems)
        if result == a.get("payload_available", "online"):
            self.available_by_topic[topic] = self.latest = True
        elif result == a.get("payload_not_available", "offline"):
            self.available_by_topic[topic] = self.latest = False
        elif result is not None:
            self.problems.append(f"availability on {topic}: {result!r} is neither available nor not available")

    def on_state(self, payload):
        result = render(self.config.get("value_template"), payload, self.problems)
        if result is None:
            return
        if self.platform == "binary_sensor":
            self.binary_state(result)
        elif self.platform == "sensor":
            self.sensor_state(result)
            if "last_reset_value_template" in self.config:
                self.update_last_reset(payload)

    def update_last_reset(self, payload):
        result = render(self.config["last_reset_value_template"], payload, self.problems)
        if not result:
            return  # "Ignoring empty last_reset message"
        when = parse_datetime(result)
        if when is None:
            self.problems.append(f"Invalid last_reset message {payload!r}")
            return
        if self.config.get("state_class") != "total":
            self.problems.append(f"with state_class {self.config.get('state_class')!r} has set last_reset, which is not supported")
            return
        self.last_reset = when.isoformat()

    def binary_state(self, result):
        if result == "":
            self.problems.append("empty template output: ignored")
        elif result == self.config.get("payload_on", "ON"):
            self.value = "on"
        elif result == self.config.get("payload_off", "OFF"):
            self.value = "off"
        elif result == PAYLOAD_NONE:
            self.value = None
        else:
            self.problems.append(f"No matching payload found: {result!r}")

    def sensor_state(self, result):
        if result == PAYLOAD_NONE:
            self.value = None
            return
        if numeric_expected(self.config):
            if result == "":
                return
            try:
                number = float(result)
            except ValueError:
                number = math.nan
            if not math.isfinite(number):
                self.problems.append(f"numeric sensor given the non-numeric value {result!r}")
                return
            self.value = result
            self.record(number)
            return
        device_class = self.config.get("device_class")
        if device_class in (None, "enum"):
            if len(result) > MAX_LENGTH_STATE_STATE:
                self.problems.append(f"state longer than {MAX_LENGTH_STATE_STATE} characters: {result[:40]!r}...")
                return
            self.value = result
            return
        when = parse_datetime(result)
        if when is None:
            self.problems.append(f"Invalid state message {result!r}")
            self.value = None
            return
        if device_class == "timestamp":
            if when.tzinfo is None:
                self.problems.append(f"Invalid datetime {result!r}: missing timezone information")
                self.value = None
                return
            self.value = when.astimezone(timezone.utc).isoformat(timespec="seconds")
        else:
            self.value = when.date().isoformat()

    def record(self, number):
        previous, self.previous_number = self.previous_number, number
        if self.config.get("state_class") != "total_increasing" or previous is None:
            return
        if 0.9 * previous <= number < previous:
            self.problems.append(f"has state class total_increasing, but its state is not strictly increasing ({previous:g} to {number:g})")
        elif number < 0.9 * previous and number != 0:
            self.problems.append(f"total_increasing fell from {previous:g} to {number:g}: the recorder takes a new meter and counts {number:g} again (right only at the day's start)")

    @property
    def available(self):
        if not self.avail:
            return True
        mode = self.config.get("availability_mode", "latest")
        if mode == "all":
            return all(self.available_by_topic.values())
        if mode == "any":
            return any(self.available_by_topic.values())
        return self.latest

    def shown(self):
        if not self.available:
            return "unavailable"
        return "unknown" if self.value is None else self.value


def over_time(prefix, messages):
    """
    mqtt/discovery.py and mqtt/entity.py, in the order things arrive: an entity is set up at its
    discovery config and subscribes, so it is handed what is retained on its topics (the last
    message of each here; an empty one retains nothing); a new config updates it in place, and a
    topic it did not read before hands it what is retained there; an empty config removes it, and
    it reads nothing after. Removed entities are reported too, with what they logged.
    """
    live = {}
    removed = []
    retained = {}
    for m in messages:
        topic, payload = m["topic"], m["payload"]
        parts = topic.split("/")
        if topic.startswith(prefix + "/") and parts[-1] == "config" and len(parts) in (4, 5):
            entity = live.get(topic)
            if payload == "":
                if entity is not None:
                    entity.removed = True
                    removed.append(live.pop(topic))
                continue
            before = set(entity.topics()) if entity is not None else set()
            config = expand_discovery(json.loads(payload))
            if entity is None:
                entity = live[topic] = Entity(parts[1], config)
            else:
                entity.update(config)
            for t in entity.topics():
                if t not in before and retained.get(t):
                    entity.receive(t, retained[t])
            continue
        for e in live.values():
            e.receive(topic, payload)
        retained[topic] = payload
    return list(live.values()) + removed


def main():
    request = json.load(sys.stdin)
    entities = over_time(request["discoveryPrefix"], request["messages"])
    json.dump({"entities": [
        {"unique_id": e.config.get("unique_id"), "platform": e.platform, "state": e.shown(), "available": e.available,
         "last_reset": e.last_reset, "problems": e.problems, "removed": e.removed}
        for e in entities
    ]}, sys.stdout)


if __name__ == "__main__":
    main()
