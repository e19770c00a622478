"""Stand-in for ray.exceptions: the classes the deploy script may see."""


class RayError(Exception):
    pass


class RaySystemError(RayError):
    pass


class RayActorError(RayError):
    """The actor died (ray.kill, its process exited) or could not be created."""


class RayTaskError(RayError):
    """A method of the actor raised; the message names the original exception."""


class GetTimeoutError(RayError, TimeoutError):
    pass
