;;;; handle.lisp - ownership of one object the library allocated (knn_index*,
;;;; knn_quadtree*), shared by INDEX and QUADTREE.
;;;;
;;;; Every function that calls the library on the object holds it (WITH-HANDLE)
;;;; from before it reads the pointer until the foreign call has returned. A
;;;; FREE-HANDLE while other threads hold it closes the object at once (calls
;;;; made afterwards signal KNN-USAGE-ERROR), lets the running calls finish with
;;;; their full results, and leaves the free to the last of them, as the library
;;;; itself does for its own calls. Holding it in Lisp too closes the gap
;;;; between reading the pointer and entering the library: a pointer freed in
;;;; that gap could be reused by another object's build, and the call would then
;;;; run on that object with this one's array sizes; two frees racing could both
;;;; read the pointer and free it twice. A held object is also reachable until
;;;; the call returns (the release names it), so its finalizer cannot free the
;;;; pointer under a running call.
;;;;
;;;; The lock is SBCL's mutex; elsewhere (no threads assumed, and no finalizer)
;;;; WITH-HANDLE-LOCK only runs its body.

(in-package #:knn-gpgpu)

(defstruct (native-handle (:constructor nil) (:copier nil))
  (pointer nil)                    ; NIL once freed, or left to the last call in flight
  (free nil :read-only t)          ; the foreign free function, e.g. %index-free
  (lock #+sbcl (sb-thread:make-mutex :name "knn-gpgpu handle") #-sbcl nil :read-only t)
  (calls 0 :type fixnum)           ; calls inside WITH-HANDLE
  (doomed nil))                    ; the pointer the last of those calls frees

(defmacro with-handle-lock ((object) &body body)
  #+sbcl `(sb-thread:with-mutex ((native-handle-lock ,object)) ,@body)
  #-sbcl `(progn ,object ,@body))

(defun adopt-handle (object pointer)
  "Give OBJECT ownership of POINTER; the garbage collector frees it if OBJECT is forgotten.
The finalizer closes over the pointer alone, so that it does not keep OBJECT alive."
  (setf (native-handle-pointer object) pointer)
  #+sbcl (let ((free (native-handle-free object)))
           (sb-ext:finalize object (lambda () (funcall free pointer)) :dont-save t))
  object)

(defun hold-handle (object what)
  "The live pointer of OBJECT, counted as a call in flight; KNN-USAGE-ERROR when closed."
  (with-handle-lock (object)
    (let ((pointer (native-handle-pointer object)))
      (unless pointer
        (usage-error "the ~A is closed" what))
      (incf (native-handle-calls object))
      pointer)))

(defun release-handle (object)
  (let ((doomed (with-handle-lock (object)
                  (when (zerop (decf (native-handle-calls object)))
                    (shiftf (native-handle-doomed object) nil)))))
    (when doomed
      ;; The library frees a live handle without fail; the status has no caller
      ;; to go to (FREE-HANDLE returned long ago).
      (funcall (native-handle-free object) doomed))))

(defmacro with-handle ((pointer object what) &body body)
  "Run BODY with POINTER bound to OBJECT's live foreign pointer, held until BODY
returns (see the file's header). WHAT names the object in the closed error."
  (let ((o (gensym "OBJECT")))
    `(let* ((,o ,object)
            (,pointer (hold-handle ,o ,what)))
       (unwind-protect (progn ,@body)
         (release-handle ,o)))))

(defun free-handle (object function-name)
  "Close OBJECT and free its pointer now, or when the last call in flight
returns; closing a closed object does nothing."
  (let ((pointer (with-handle-lock (object)
                   (let ((pointer (shiftf (native-handle-pointer object) nil)))
                     (when pointer
                       #+sbcl (sb-ext:cancel-finalization object)
                       (when (plusp (native-handle-calls object))
                         (setf (native-handle-doomed object) pointer
                               pointer nil)))
                     pointer))))
    (when pointer
      (check-status function-name (funcall (native-handle-free object) pointer))))
  (values))
