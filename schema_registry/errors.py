"""Confluent Schema Registry's errors: an HTTP status, an `error_code` and a `message` (its
`RestException` family; the codes are those of Confluent's `Errors` class). Domain code raises these; the
REST layer turns one into the JSON body `{"error_code": ..., "message": ...}`."""
from __future__ import annotations


class RegistryError(Exception):
    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, detail)


def schema_id_not_found(schema_id: int) -> RegistryError:
    return RegistryError(404, 40403, f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true "
                                     "to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                                     "permanently deleted")


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible_schema(subject: str, details: list[str]) -> RegistryError:
    return RegistryError(409, 409, f"Schema being registered is incompatible with an earlier schema for subject "
                                   f"\"{subject}\", details: [{', '.join(details)}]")


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed values "
                                     "are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility_level() -> RegistryError:
    return RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                     "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode {mode}. Valid values are READWRITE, READONLY and IMPORT")


def operation_not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, 42205, detail)


def reference_exists(detail: str) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema {detail}.")


def unprocessable(detail: str) -> RegistryError:
    """A request body that is not what the endpoint takes (Confluent answers 422 with code 422)."""
    return RegistryError(422, 422, detail)


def store_error(detail: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store - {detail}")


# ---- a registry of several nodes (a multi-node cluster): Confluent's RestServerErrorException family (HTTP 500)

class NotLeader(RegistryError):
    """This node does not lead `_schemas` partition 0, so it may not write: the REST layer forwards the write
    to the leader's listener (forwarding.py); unforwarded it answers Confluent's 50004."""

    def __init__(self) -> None:
        super().__init__(500, 50004, "Leader not known.")


def operation_timed_out(message: str = "Operation timed out") -> RegistryError:
    return RegistryError(500, 50002, message)


def forwarding_failed(message: str) -> RegistryError:
    return RegistryError(500, 50003, message)


def unknown_leader() -> RegistryError:
    return RegistryError(500, 50004, "Leader not known.")
